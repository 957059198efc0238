//! Broker selectors: the one string a model uses to name a server or a tool.
//!
//! | selector | means |
//! |---|---|
//! | `local_code` | the configured server `local_code` |
//! | `local_code.add` | tool `add` on it (the longest configured server name wins, so dotted server names work) |
//! | `https://h/mcp` | an ad-hoc HTTP server at that URL |
//! | `https://h/mcp.add` | tool `add` there: the tool starts after the first dot of the last path segment |
//! | `https://h/mcp#tool=add` | the same, unambiguous (needed when the URL has a query, a fragment or a dotted last segment) |
//!
//! Parsing is pure: it needs only the configured server names.

use std::fmt;

/// Where a selector points: a configured server, or an ad-hoc URL.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// A server configured by name.
    Named(String),
    /// An ad-hoc HTTP(S) endpoint, exactly as given.
    Url(String),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Named(name) => f.write_str(name),
            Target::Url(url) => f.write_str(url),
        }
    }
}

/// A selector naming a tool on a target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSelector {
    /// The server.
    pub target: Target,
    /// The tool's exact name on that server.
    pub tool: String,
}

/// Why a selector could not be parsed; each message tells the model how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The selector was empty.
    #[error("selector is empty; pass a server name from mcp_list_servers or an http(s) URL")]
    Empty,
    /// No configured server has that name (or prefix).
    #[error("unknown server {given:?}; known servers: {}", list_or_none(known))]
    UnknownServer {
        /// What was given.
        given: String,
        /// The configured names.
        known: Vec<String>,
    },
    /// A tool selector named only a server.
    #[error("selector {0:?} names a server, not a tool; use SERVER.TOOL (or URL#tool=TOOL)")]
    MissingTool(String),
    /// A server selector named a tool.
    #[error("selector {0:?} names a tool; this operation takes a server (drop the tool part)")]
    UnexpectedTool(String),
    /// A URL whose dotted tool form would be ambiguous.
    #[error("selector {0:?} is ambiguous; use the URL#tool=TOOL form")]
    Ambiguous(String),
    /// A URL that is not http(s) or does not parse.
    #[error("invalid URL {url:?}: {reason}")]
    InvalidUrl {
        /// What was given.
        url: String,
        /// Why it is invalid.
        reason: String,
    },
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "(none)".to_string()
    } else {
        names.join(", ")
    }
}

const TOOL_FRAGMENT: &str = "#tool=";

fn is_url(selector: &str) -> bool {
    let lower = selector.get(..8).unwrap_or(selector).to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://")
}

/// Checks that `url` is an absolute http(s) URL with a host.
fn check_url(url: &str) -> Result<(), SelectorError> {
    // The url crate repairs `https:///x` into host `x`; a selector must say its host itself.
    let authority = url.split_once("://").map_or("", |(_, rest)| rest);
    if authority.is_empty() || authority.starts_with('/') {
        return Err(SelectorError::InvalidUrl {
            url: url.to_string(),
            reason: "the URL has no host".into(),
        });
    }
    let parsed = url::Url::parse(url).map_err(|e| SelectorError::InvalidUrl {
        url: url.to_string(),
        reason: e.to_string(),
    })?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(SelectorError::InvalidUrl {
            url: url.to_string(),
            reason: "only http and https URLs with a host are supported".into(),
        });
    }
    Ok(())
}

/// Parses a selector that names a server (for `mcp_list_tools` and `mcp_inspect_tools`).
pub fn parse_server_selector(selector: &str, servers: &[&str]) -> Result<Target, SelectorError> {
    let selector = selector.trim();
    if selector.is_empty() {
        return Err(SelectorError::Empty);
    }
    if is_url(selector) {
        if selector.contains(TOOL_FRAGMENT) {
            return Err(SelectorError::UnexpectedTool(selector.to_string()));
        }
        check_url(selector)?;
        return Ok(Target::Url(selector.to_string()));
    }
    if servers.contains(&selector) {
        return Ok(Target::Named(selector.to_string()));
    }
    if longest_server_prefix(selector, servers).is_some() {
        return Err(SelectorError::UnexpectedTool(selector.to_string()));
    }
    Err(unknown_server(selector, servers))
}

/// Parses a selector that names a tool (for `mcp_call`).
pub fn parse_tool_selector(
    selector: &str,
    servers: &[&str],
) -> Result<ToolSelector, SelectorError> {
    let selector = selector.trim();
    if selector.is_empty() {
        return Err(SelectorError::Empty);
    }
    if is_url(selector) {
        return parse_url_tool(selector);
    }
    match longest_server_prefix(selector, servers) {
        Some(server) => {
            let tool = &selector[server.len() + 1..];
            Ok(ToolSelector {
                target: Target::Named(server.to_string()),
                tool: tool.to_string(),
            })
        }
        None if servers.contains(&selector.strip_suffix('.').unwrap_or(selector)) => {
            Err(SelectorError::MissingTool(selector.to_string()))
        }
        None => Err(unknown_server(selector, servers)),
    }
}

fn unknown_server(selector: &str, servers: &[&str]) -> SelectorError {
    let mut known: Vec<String> = servers.iter().map(|s| s.to_string()).collect();
    known.sort();
    SelectorError::UnknownServer {
        given: selector.to_string(),
        known,
    }
}

/// The longest configured name `s` such that `selector` is `s.TOOL` with a non-empty tool.
fn longest_server_prefix<'a>(selector: &str, servers: &[&'a str]) -> Option<&'a str> {
    servers
        .iter()
        .copied()
        .filter(|server| {
            selector.len() > server.len() + 1
                && selector.starts_with(server)
                && selector.as_bytes()[server.len()] == b'.'
        })
        .max_by_key(|server| server.len())
}

fn parse_url_tool(selector: &str) -> Result<ToolSelector, SelectorError> {
    if let Some(at) = selector.find(TOOL_FRAGMENT) {
        let (url, tool) = (&selector[..at], &selector[at + TOOL_FRAGMENT.len()..]);
        if tool.is_empty() {
            return Err(SelectorError::MissingTool(selector.to_string()));
        }
        check_url(url)?;
        return Ok(ToolSelector {
            target: Target::Url(url.to_string()),
            tool: tool.to_string(),
        });
    }
    if selector.contains('?') || selector.contains('#') {
        return Err(SelectorError::Ambiguous(selector.to_string()));
    }
    // The tool starts after the first dot of the last path segment (the authority has no
    // path segment of its own, so `https://h.example` alone names a server).
    let after_scheme = selector.find("://").map_or(0, |i| i + 3);
    let path_start = selector[after_scheme..]
        .find('/')
        .map(|i| after_scheme + i)
        .ok_or_else(|| SelectorError::MissingTool(selector.to_string()))?;
    let last_segment_start = selector.rfind('/').map_or(path_start, |i| i + 1);
    let Some(dot) = selector[last_segment_start..].find('.') else {
        return Err(SelectorError::MissingTool(selector.to_string()));
    };
    if dot == 0 {
        // `https://h/mcp/.add`: no segment before the dot, so no clear split.
        return Err(SelectorError::Ambiguous(selector.to_string()));
    }
    let (url, tool) = (
        &selector[..last_segment_start + dot],
        &selector[last_segment_start + dot + 1..],
    );
    if tool.is_empty() {
        return Err(SelectorError::MissingTool(selector.to_string()));
    }
    check_url(url)?;
    Ok(ToolSelector {
        target: Target::Url(url.to_string()),
        tool: tool.to_string(),
    })
}

/// The selector a listing shows for `tool` on `target`: `server.tool`, `URL.tool`, or
/// `URL#tool=tool` when the dotted form would not parse back to the same pair (a query, a
/// fragment, a dot in the last path segment, or no path at all).
pub fn format_tool_selector(target: &Target, tool: &str) -> String {
    match target {
        Target::Named(server) => format!("{server}.{tool}"),
        Target::Url(url) => {
            let dotted = format!("{url}.{tool}");
            let round_trips = parse_url_tool(&dotted)
                .is_ok_and(|parsed| parsed.target == *target && parsed.tool == tool);
            if round_trips {
                dotted
            } else {
                format!("{url}{TOOL_FRAGMENT}{tool}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERVERS: &[&str] = &["local_code", "acme", "acme.tools"];

    fn named(server: &str, tool: &str) -> ToolSelector {
        ToolSelector {
            target: Target::Named(server.into()),
            tool: tool.into(),
        }
    }

    fn url(url: &str, tool: &str) -> ToolSelector {
        ToolSelector {
            target: Target::Url(url.into()),
            tool: tool.into(),
        }
    }

    #[test]
    fn tool_selectors_parse_every_documented_form() {
        let table: &[(&str, ToolSelector)] = &[
            ("local_code.add", named("local_code", "add")),
            ("local_code.ns.add", named("local_code", "ns.add")),
            // The longest configured prefix wins, so dotted server names work.
            ("acme.tools.search", named("acme.tools", "search")),
            ("acme.search", named("acme", "search")),
            ("https://h/mcp.add", url("https://h/mcp", "add")),
            ("https://h/v1/mcp.ns.add", url("https://h/v1/mcp", "ns.add")),
            (
                "https://h.example.com/mcp.add",
                url("https://h.example.com/mcp", "add"),
            ),
            ("https://h/mcp#tool=add", url("https://h/mcp", "add")),
            (
                "https://h/mcp?k=v#tool=add",
                url("https://h/mcp?k=v", "add"),
            ),
            (
                "https://h/api.v2/mcp.json#tool=a.b",
                url("https://h/api.v2/mcp.json", "a.b"),
            ),
            (
                "http://127.0.0.1:8080/mcp.echo",
                url("http://127.0.0.1:8080/mcp", "echo"),
            ),
            ("  local_code.add  ", named("local_code", "add")),
        ];
        for (input, expected) in table {
            assert_eq!(
                parse_tool_selector(input, SERVERS).as_ref(),
                Ok(expected),
                "{input}"
            );
        }
    }

    #[test]
    fn bad_tool_selectors_get_errors_that_say_what_to_do() {
        use SelectorError::*;
        type Check = fn(&SelectorError) -> bool;
        let table: &[(&str, Check)] = &[
            ("", |e| matches!(e, Empty)),
            ("local_code", |e| matches!(e, MissingTool(_))),
            ("local_code.", |e| matches!(e, MissingTool(_))),
            ("nowhere.add", |e| matches!(e, UnknownServer { .. })),
            ("https://h/mcp", |e| matches!(e, MissingTool(_))),
            ("https://h", |e| matches!(e, MissingTool(_))),
            ("https://h/mcp#tool=", |e| matches!(e, MissingTool(_))),
            ("https://h/mcp?k=v.add", |e| matches!(e, Ambiguous(_))),
            ("https://h/mcp#frag", |e| matches!(e, Ambiguous(_))),
            ("https://h/mcp/.add", |e| matches!(e, Ambiguous(_))),
            ("https:///mcp.add", |e| matches!(e, InvalidUrl { .. })),
        ];
        for (input, check) in table {
            let err = parse_tool_selector(input, SERVERS).unwrap_err();
            assert!(check(&err), "{input:?} gave {err:?}");
        }
        let err = parse_tool_selector("nowhere.add", SERVERS).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"unknown server "nowhere.add"; known servers: acme, acme.tools, local_code"#
        );
    }

    #[test]
    fn server_selectors_take_names_and_urls_only() {
        assert_eq!(
            parse_server_selector("local_code", SERVERS),
            Ok(Target::Named("local_code".into()))
        );
        assert!(matches!(
            parse_server_selector("", SERVERS),
            Err(SelectorError::Empty)
        ));
        assert_eq!(
            parse_server_selector("acme.tools", SERVERS),
            Ok(Target::Named("acme.tools".into()))
        );
        assert_eq!(
            parse_server_selector("https://h/mcp", SERVERS),
            Ok(Target::Url("https://h/mcp".into()))
        );
        // A dotted last segment is part of a server URL here: no tool is expected.
        assert_eq!(
            parse_server_selector("https://h/mcp.json?x=1", SERVERS),
            Ok(Target::Url("https://h/mcp.json?x=1".into()))
        );
        assert!(matches!(
            parse_server_selector("local_code.add", SERVERS),
            Err(SelectorError::UnexpectedTool(_))
        ));
        assert!(matches!(
            parse_server_selector("https://h/mcp#tool=add", SERVERS),
            Err(SelectorError::UnexpectedTool(_))
        ));
        assert!(matches!(
            parse_server_selector("ftp://h/mcp", SERVERS),
            Err(SelectorError::UnknownServer { .. })
        ));
        assert!(matches!(
            parse_server_selector("http://", SERVERS),
            Err(SelectorError::InvalidUrl { .. })
        ));
    }

    #[test]
    fn listings_print_the_fragment_form_only_when_the_dotted_form_is_ambiguous() {
        let table: &[(&str, &str, &str)] = &[
            ("https://h/mcp", "add", "https://h/mcp.add"),
            ("https://h/mcp", "ns.add", "https://h/mcp.ns.add"),
            ("https://h/mcp?k=v", "add", "https://h/mcp?k=v#tool=add"),
            ("https://h/mcp.json", "add", "https://h/mcp.json#tool=add"),
            ("https://h/mcp/", "add", "https://h/mcp/#tool=add"),
            ("https://h", "add", "https://h#tool=add"),
            ("https://h/mcp#v2", "add", "https://h/mcp#v2#tool=add"),
        ];
        for (base, tool, expected) in table {
            let target = Target::Url(base.to_string());
            let shown = format_tool_selector(&target, tool);
            assert_eq!(shown, *expected);
            // Whatever is shown parses back to the same target and tool.
            let parsed = parse_tool_selector(&shown, SERVERS).unwrap();
            assert_eq!((parsed.target, parsed.tool.as_str()), (target, *tool));
        }
        assert_eq!(
            format_tool_selector(&Target::Named("acme.tools".into()), "search"),
            "acme.tools.search"
        );
    }
}
