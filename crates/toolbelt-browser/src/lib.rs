//! Browser tools for LLM agents: a real Chromium driven over the Chrome DevTools Protocol.
//!
//! [`BrowserToolSet`] offers six tools:
//!
//! | tool | does |
//! |---|---|
//! | `browser_navigate {url}` | opens an http(s) URL; returns the snapshot |
//! | `browser_snapshot` | the page's title, URL and an outline of its text and elements, interactive ones with references (`e12`) |
//! | `browser_click {ref}` | clicks an element like a user (real mouse events); returns the new snapshot |
//! | `browser_type {ref, text, submit?}` | replaces a field's text, optionally presses Enter; returns the new snapshot |
//! | `browser_screenshot` | a PNG of the viewport as an image block |
//! | `browser_close` | kills the browser; the next call starts a new one |
//!
//! **One browser per tool set**, started on first use with a fresh profile in a temporary
//! directory, in a process group of its own, talking CDP over a pipe (no debugging port).
//! `browser_close`, [`ToolSet::close`](toolbelt_core::ToolSet::close) and dropping the set
//! kill the whole group and remove the profile; a browser that crashed is replaced on the
//! next call, which says so.
//!
//! **The network is WebFetch's**: every request the browser makes (the page, its images,
//! scripts, iframes, `fetch` calls, form posts, redirects, WebSockets) goes through a proxy
//! of ours that applies [`DomainPolicy`](toolbelt_builtin::web::DomainPolicy) and the SSRF
//! guard [`AddressPolicy`](toolbelt_builtin::web::AddressPolicy) where it connects, so a
//! public page cannot make the browser reach `127.0.0.1`, the local network or the cloud
//! metadata address. Only http and https URLs are opened; downloads are denied and popups
//! closed. Refused requests are listed in the next result. Snapshot text is capped
//! ([`BrowserOptions::with_max_snapshot_chars`]).
//!
//! Chromium comes from the system: [`BrowserOptions::with_chromium`], else the
//! `TOOLBELT_CHROMIUM` variable, else `chromium`, `chromium-browser` or `google-chrome` on
//! `PATH`; without one the first call fails saying how to install it
//! (`apt-get install chromium`).

#![warn(missing_docs)]

mod browser;
mod cdp;
mod egress;
mod options;
mod policy;
mod process;
mod tools;

pub use options::{BrowserOptions, DEFAULT_MAX_SNAPSHOT_CHARS, DEFAULT_TIMEOUT, DEFAULT_VIEWPORT};
pub use process::CHROMIUM_ENV;
pub use tools::BrowserToolSet;
