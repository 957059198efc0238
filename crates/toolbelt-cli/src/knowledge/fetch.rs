//! `--allow-address` for URL sources: the ranges WebFetch's address guard lets through,
//! read into the [`WebFetchSource`] that fetches a knowledge base's pages.

use toolbelt::builtin::web::{AddressPolicy, IpNet};
use toolbelt_knowledge::WebFetchSource;

use crate::common::CliError;

/// A fetcher whose guard also lets through the ranges in `allowed` (`--allow-address`).
pub fn web_fetch_source(allowed: &[String]) -> Result<WebFetchSource, CliError> {
    let mut addresses = AddressPolicy::default();
    for range in allowed {
        let net: IpNet = range
            .parse()
            .or_else(|_| range.parse::<std::net::IpAddr>().map(IpNet::from))
            .map_err(|_| {
                CliError::usage(format!(
                    "--allow-address {range:?}: not an address or a range (127.0.0.1, 10.0.0.0/8)"
                ))
            })?;
        addresses = addresses.allow(net);
    }
    WebFetchSource::new(addresses).map_err(|e| CliError::failed(format!("the URL fetcher: {e}")))
}
