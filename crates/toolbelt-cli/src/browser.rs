//! `--browser`: the browser tools (`toolbelt-browser`) beside the built-in ones, when this
//! binary was built with the `browser` feature.

use std::sync::Arc;

use toolbelt::ToolSet;

use crate::common::{CliError, ToolSourceArgs};

/// The browser tool set `args` asks for, if any. Its Chromium starts on the first browser
/// call; closing the set (the toolbox does) kills it.
#[cfg(feature = "browser")]
pub fn browser_tool_set(args: &ToolSourceArgs) -> Result<Option<Arc<dyn ToolSet>>, CliError> {
    use toolbelt::browser::{BrowserOptions, BrowserToolSet};
    if !args.browser {
        return Ok(None);
    }
    let mut options = BrowserOptions::default();
    if let Some(path) = &args.chromium {
        options = options.with_chromium(path);
    }
    Ok(Some(Arc::new(BrowserToolSet::new(options))))
}

/// Without the feature, `--browser` is a usage error saying how to get it.
#[cfg(not(feature = "browser"))]
pub fn browser_tool_set(args: &ToolSourceArgs) -> Result<Option<Arc<dyn ToolSet>>, CliError> {
    if args.browser {
        return Err(CliError::usage(
            "this toolbelt was built without the browser tools; build it with \
             `cargo install --path crates/toolbelt-cli --features browser`",
        ));
    }
    Ok(None)
}
