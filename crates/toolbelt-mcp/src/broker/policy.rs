//! What a model may do with ad-hoc URLs: whether they are allowed at all, which URLs the host
//! application accepts, and which headers the model may set.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::error::BrokerError;
use crate::transport::parse_header;

/// Decides whether the broker may connect to an ad-hoc URL; runs before any connection.
pub type UrlAllowList = Arc<dyn Fn(&url::Url) -> bool + Send + Sync>;

/// Headers a model may never set, because they carry credentials: those come from the host
/// application's header injector. Compared case-insensitively; more can be configured.
pub const DENIED_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-api-key",
];

/// Headers the transport manages; a model setting them would break the session.
const TRANSPORT_HEADERS: &[&str] = &[
    "accept",
    "connection",
    "content-length",
    "content-type",
    "host",
    "last-event-id",
    "mcp-protocol-version",
    "mcp-session-id",
    "transfer-encoding",
];

/// The ad-hoc policy of one broker.
#[derive(Clone, Default)]
pub(crate) struct AdHocPolicy {
    pub enabled: bool,
    pub allow: Option<UrlAllowList>,
    /// Extra denied header names, lower-cased.
    pub extra_denied: Vec<String>,
}

impl AdHocPolicy {
    /// Checks an ad-hoc URL: ad-hoc HTTP must be on and the allow-list must accept it.
    pub fn check_url(&self, url: &str, servers: &[String]) -> Result<(), BrokerError> {
        if !self.enabled {
            return Err(BrokerError::AdHocDisabled {
                url: url.to_string(),
                servers: servers.to_vec(),
            });
        }
        // Credentials in the URL would bypass the header deny list (HTTP clients send them
        // as basic auth).
        if url::Url::parse(url).is_ok_and(|u| !u.username().is_empty() || u.password().is_some()) {
            return Err(BrokerError::CredentialsInUrl {
                url: url.to_string(),
            });
        }
        if let Some(allow) = &self.allow {
            // The selector parser checked the URL already; a failure here is a refusal too.
            let allowed = url::Url::parse(url).is_ok_and(|parsed| allow(&parsed));
            if !allowed {
                return Err(BrokerError::UrlNotAllowed {
                    url: url.to_string(),
                });
            }
        }
        Ok(())
    }

    /// Checks the model's headers for an ad-hoc URL and returns them as pairs.
    pub fn check_headers(
        &self,
        headers: &BTreeMap<String, String>,
    ) -> Result<Vec<(String, String)>, BrokerError> {
        let mut checked = Vec::with_capacity(headers.len());
        for (name, value) in headers {
            let lower = name.trim().to_ascii_lowercase();
            if DENIED_HEADERS.contains(&lower.as_str()) || self.extra_denied.contains(&lower) {
                return Err(BrokerError::ForbiddenHeader {
                    name: name.clone(),
                    reason: "credentials come from the host application, not from the model",
                });
            }
            if TRANSPORT_HEADERS.contains(&lower.as_str()) {
                return Err(BrokerError::ForbiddenHeader {
                    name: name.clone(),
                    reason: "the transport manages it",
                });
            }
            parse_header(name, value).map_err(BrokerError::InvalidHeader)?;
            checked.push((name.clone(), value.clone()));
        }
        Ok(checked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn credential_headers_are_refused_whatever_their_case() {
        let policy = AdHocPolicy {
            enabled: true,
            extra_denied: vec!["x-tenant-secret".into()],
            ..AdHocPolicy::default()
        };
        for name in [
            "Authorization",
            "PROXY-AUTHORIZATION",
            "cookie",
            "Set-Cookie",
            "X-Api-Key",
            "X-Tenant-Secret",
        ] {
            let err = policy.check_headers(&headers(&[(name, "v")])).unwrap_err();
            assert!(
                matches!(&err, BrokerError::ForbiddenHeader { name: n, .. } if n == name),
                "{name}: {err}"
            );
            assert!(err.to_string().contains("host application"), "{err}");
        }
    }

    #[test]
    fn transport_headers_and_malformed_headers_are_refused() {
        let policy = AdHocPolicy::default();
        let err = policy
            .check_headers(&headers(&[("Mcp-Session-Id", "x")]))
            .unwrap_err();
        assert!(err.to_string().contains("transport manages it"), "{err}");
        let err = policy
            .check_headers(&headers(&[("bad header", "x")]))
            .unwrap_err();
        assert!(matches!(err, BrokerError::InvalidHeader(_)), "{err}");
        let err = policy
            .check_headers(&headers(&[("X-Ok", "line\nbreak")]))
            .unwrap_err();
        assert!(matches!(err, BrokerError::InvalidHeader(_)), "{err}");
        let ok = policy
            .check_headers(&headers(&[("X-Trace", "abc")]))
            .unwrap();
        assert_eq!(ok, vec![("X-Trace".to_string(), "abc".to_string())]);
    }

    #[test]
    fn urls_need_ad_hoc_on_and_the_allow_list_to_agree() {
        let servers = vec!["local".to_string()];
        let off = AdHocPolicy::default();
        let err = off
            .check_url("http://127.0.0.1:1/mcp", &servers)
            .unwrap_err();
        assert!(matches!(err, BrokerError::AdHocDisabled { .. }));
        assert!(err.to_string().contains("local"), "{err}");

        let open = AdHocPolicy {
            enabled: true,
            ..AdHocPolicy::default()
        };
        assert!(open.check_url("http://127.0.0.1:1/mcp", &servers).is_ok());
        for with_credentials in [
            "http://user:pw@127.0.0.1:1/mcp",
            "http://token@127.0.0.1:1/mcp",
        ] {
            let err = open.check_url(with_credentials, &servers).unwrap_err();
            assert!(matches!(err, BrokerError::CredentialsInUrl { .. }), "{err}");
        }

        let loopback_only = AdHocPolicy {
            enabled: true,
            allow: Some(Arc::new(|url: &url::Url| {
                url.host_str() == Some("127.0.0.1")
            })),
            ..AdHocPolicy::default()
        };
        assert!(
            loopback_only
                .check_url("http://127.0.0.1:1/mcp", &servers)
                .is_ok()
        );
        let err = loopback_only
            .check_url("http://example.invalid/mcp", &servers)
            .unwrap_err();
        assert!(matches!(err, BrokerError::UrlNotAllowed { .. }), "{err}");
    }
}
