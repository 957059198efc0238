//! Domain rules shared by WebFetch's policy and WebSearch's result filters.
//!
//! A rule `example.com` matches `example.com` and every subdomain (`docs.example.com`); a rule
//! `*.example.com` matches subdomains only. Matching is case-insensitive, ignores a trailing
//! dot, and works label by label, so `example.com` never matches `badexample.com`.

use std::fmt;

/// One domain rule: `example.com` (the domain and its subdomains) or `*.example.com`
/// (subdomains only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainRule {
    domain: String,
    subdomains_only: bool,
}

impl DomainRule {
    /// Parses a rule; a scheme, path or port around the domain is tolerated and dropped
    /// (`https://example.com/docs` is the rule `example.com`). Fails on an empty rule.
    pub fn parse(rule: &str) -> Result<Self, String> {
        let mut text = rule.trim();
        if let Some((_, rest)) = text.split_once("://") {
            text = rest;
        }
        let text = text.split(['/', '?', '#']).next().unwrap_or("");
        let text = match text.rsplit_once(':') {
            Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host,
            _ => text,
        };
        let (domain, subdomains_only) = match text.strip_prefix("*.") {
            Some(rest) => (rest, true),
            None => (text, false),
        };
        let domain = domain.trim_end_matches('.').to_ascii_lowercase();
        if domain.is_empty() || domain.contains('*') || domain.contains(char::is_whitespace) {
            return Err(format!(
                "{rule:?} is not a domain (use example.com or *.example.com)"
            ));
        }
        Ok(Self {
            domain,
            subdomains_only,
        })
    }

    /// Whether `host` matches this rule.
    pub fn matches(&self, host: &str) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host == self.domain {
            return !self.subdomains_only;
        }
        host.strip_suffix(&self.domain)
            .is_some_and(|rest| rest.ends_with('.'))
    }
}

impl fmt::Display for DomainRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.subdomains_only {
            write!(f, "*.{}", self.domain)
        } else {
            f.write_str(&self.domain)
        }
    }
}

/// Why a host was refused by a [`DomainPolicy`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DomainRefusal {
    /// The host matches a block rule.
    Blocked {
        /// The host.
        host: String,
        /// The rule it matched.
        rule: String,
    },
    /// An allow list is set and the host matches none of it.
    NotAllowed {
        /// The host.
        host: String,
    },
}

impl fmt::Display for DomainRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Blocked { host, rule } => {
                write!(f, "the domain {host} is blocked (rule {rule})")
            }
            Self::NotAllowed { host } => {
                write!(f, "the domain {host} is not in the list of allowed domains")
            }
        }
    }
}

/// An allow list and a block list of domains. The block list is checked first; an empty
/// allow list allows every domain that is not blocked.
///
/// ```
/// use toolbelt_builtin::web::DomainPolicy;
/// let policy = DomainPolicy::new()
///     .allow("example.com").unwrap()
///     .block("*.private.example.com").unwrap();
/// assert!(policy.check("docs.example.com").is_ok());
/// assert!(policy.check("a.private.example.com").is_err());
/// assert!(policy.check("example.org").is_err());
/// ```
#[derive(Debug, Clone, Default)]
pub struct DomainPolicy {
    allowed: Vec<DomainRule>,
    blocked: Vec<DomainRule>,
}

impl DomainPolicy {
    /// Allows every domain.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an allow rule (after which only allowed domains pass).
    pub fn allow(mut self, rule: &str) -> Result<Self, String> {
        self.allowed.push(DomainRule::parse(rule)?);
        Ok(self)
    }

    /// Adds a block rule.
    pub fn block(mut self, rule: &str) -> Result<Self, String> {
        self.blocked.push(DomainRule::parse(rule)?);
        Ok(self)
    }

    /// Builds a policy from lists of rules.
    pub fn from_lists<A, B>(allowed: A, blocked: B) -> Result<Self, String>
    where
        A: IntoIterator,
        A::Item: AsRef<str>,
        B: IntoIterator,
        B::Item: AsRef<str>,
    {
        Ok(Self {
            allowed: parse_rules(allowed)?,
            blocked: parse_rules(blocked)?,
        })
    }

    /// Whether no rule is set.
    pub fn is_empty(&self) -> bool {
        self.allowed.is_empty() && self.blocked.is_empty()
    }

    /// Checks a host: block rules first, then the allow list if one is set.
    pub fn check(&self, host: &str) -> Result<(), DomainRefusal> {
        if let Some(rule) = self.blocked.iter().find(|r| r.matches(host)) {
            return Err(DomainRefusal::Blocked {
                host: host.to_string(),
                rule: rule.to_string(),
            });
        }
        if !self.allowed.is_empty() && !self.allowed.iter().any(|r| r.matches(host)) {
            return Err(DomainRefusal::NotAllowed {
                host: host.to_string(),
            });
        }
        Ok(())
    }
}

/// Parses a list of rules, failing on the first bad one.
pub(crate) fn parse_rules<I>(rules: I) -> Result<Vec<DomainRule>, String>
where
    I: IntoIterator,
    I::Item: AsRef<str>,
{
    rules
        .into_iter()
        .map(|r| DomainRule::parse(r.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(text: &str) -> DomainRule {
        DomainRule::parse(text).unwrap()
    }

    #[test]
    fn a_plain_domain_covers_itself_and_its_subdomains_only() {
        let r = rule("example.com");
        assert!(r.matches("example.com"));
        assert!(r.matches("Docs.Example.COM."));
        assert!(r.matches("a.b.example.com"));
        assert!(!r.matches("badexample.com"));
        assert!(!r.matches("example.com.evil.test"));
    }

    #[test]
    fn a_star_rule_covers_subdomains_but_not_the_domain() {
        let r = rule("*.example.com");
        assert!(r.matches("docs.example.com"));
        assert!(!r.matches("example.com"));
        assert_eq!(r.to_string(), "*.example.com");
    }

    #[test]
    fn urls_and_ports_in_rules_are_reduced_to_the_domain() {
        assert_eq!(
            rule("https://Example.com:8443/path?q=1"),
            rule("example.com")
        );
        assert!(DomainRule::parse("  ").is_err());
        assert!(DomainRule::parse("*").is_err());
        assert!(DomainRule::parse("a.*.com").is_err());
    }

    #[test]
    fn block_rules_win_over_allow_rules() {
        let policy = DomainPolicy::from_lists(["example.com"], ["secret.example.com"]).unwrap();
        assert!(policy.check("www.example.com").is_ok());
        assert_eq!(
            policy
                .check("x.secret.example.com")
                .unwrap_err()
                .to_string(),
            "the domain x.secret.example.com is blocked (rule secret.example.com)"
        );
        assert!(matches!(
            policy.check("example.org"),
            Err(DomainRefusal::NotAllowed { .. })
        ));
    }
}
