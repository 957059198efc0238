//! What a browser tool set is configured with.

use std::path::PathBuf;
use std::time::Duration;

use toolbelt_builtin::web::{AddressPolicy, DomainPolicy};

/// The default page size, in CSS pixels (also the screenshot size).
pub const DEFAULT_VIEWPORT: (u32, u32) = (1280, 800);
/// The default cap on the text of one snapshot, in characters.
pub const DEFAULT_MAX_SNAPSHOT_CHARS: usize = 40_000;
/// The default limit for one browser operation (a page load, one protocol command).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Options of a [`BrowserToolSet`](crate::BrowserToolSet).
///
/// The network policy is WebFetch's: [`DomainPolicy`] (block list first, then the allow list)
/// and [`AddressPolicy`] (the SSRF guard, on by default). Both apply to every request the
/// browser makes, not only to the URLs the model opens.
///
/// ```
/// use toolbelt_browser::BrowserOptions;
/// use toolbelt_builtin::web::AddressPolicy;
///
/// // A test page on 127.0.0.1 (refused by default):
/// let options = BrowserOptions::default()
///     .with_addresses(AddressPolicy::default().allow("127.0.0.1/32".parse().unwrap()));
/// ```
#[derive(Debug, Clone)]
pub struct BrowserOptions {
    pub(crate) chromium: Option<PathBuf>,
    pub(crate) domains: DomainPolicy,
    pub(crate) addresses: AddressPolicy,
    pub(crate) viewport: (u32, u32),
    pub(crate) max_snapshot_chars: usize,
    pub(crate) timeout: Duration,
}

impl Default for BrowserOptions {
    fn default() -> Self {
        Self {
            chromium: None,
            domains: DomainPolicy::new(),
            addresses: AddressPolicy::default(),
            viewport: DEFAULT_VIEWPORT,
            max_snapshot_chars: DEFAULT_MAX_SNAPSHOT_CHARS,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

impl BrowserOptions {
    /// The Chromium executable to run. Without it: `TOOLBELT_CHROMIUM`, else the first of
    /// `chromium`, `chromium-browser`, `google-chrome` on `PATH`.
    pub fn with_chromium(mut self, path: impl Into<PathBuf>) -> Self {
        self.chromium = Some(path.into());
        self
    }

    /// The domains the browser may reach (default: every domain).
    pub fn with_domains(mut self, domains: DomainPolicy) -> Self {
        self.domains = domains;
        self
    }

    /// The addresses the browser may reach (default: public addresses only).
    pub fn with_addresses(mut self, addresses: AddressPolicy) -> Self {
        self.addresses = addresses;
        self
    }

    /// The page size in CSS pixels (and the screenshot size); at least 100×100.
    pub fn with_viewport(mut self, width: u32, height: u32) -> Self {
        self.viewport = (width.clamp(100, 8192), height.clamp(100, 8192));
        self
    }

    /// The cap on the text of one snapshot, in characters.
    pub fn with_max_snapshot_chars(mut self, chars: usize) -> Self {
        self.max_snapshot_chars = chars;
        self
    }

    /// The limit for one browser operation (a page load, one protocol command).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}
