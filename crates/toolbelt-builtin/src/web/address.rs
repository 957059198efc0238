//! The SSRF guard: which IP addresses a fetch may connect to.
//!
//! A model chooses the URLs WebFetch fetches, so without a guard it could read the cloud
//! metadata service or an admin page on the local network. [`AddressPolicy`] refuses every
//! address that is not globally routable (loopback, private, link-local, unique-local, the
//! metadata address, and the other special ranges) unless the policy explicitly allows it.
//!
//! The check runs on the addresses a host name *resolves to*, inside the HTTP client's DNS
//! resolver ([`GuardedResolver`]), so the address that was checked is the address that is
//! connected to: a name that resolves to a public address when checked and a private one when
//! connecting (DNS rebinding) cannot slip through. IP literals in URLs never reach a resolver,
//! so WebFetch checks them itself before each request, redirects included.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// The cloud metadata service address (AWS, GCP, Azure, OpenStack and others).
pub const METADATA_ADDRESS: Ipv4Addr = Ipv4Addr::new(169, 254, 169, 254);

/// Why an address is not public.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AddressKind {
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16` (and the deprecated `fec0::/10`).
    Private,
    /// `169.254.0.0/16`, `fe80::/10`.
    LinkLocal,
    /// `fc00::/7`.
    UniqueLocal,
    /// The cloud metadata service: `169.254.169.254`, `fd00:ec2::254`.
    Metadata,
    /// `0.0.0.0/8`, `::`.
    Unspecified,
    /// `100.64.0.0/10`, carrier-grade NAT.
    SharedAddressSpace,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// Documentation, benchmarking, protocol-assignment, reserved and broadcast ranges.
    Reserved,
}

impl AddressKind {
    fn describe(self) -> &'static str {
        match self {
            Self::Loopback => "a loopback address",
            Self::Private => "a private network address",
            Self::LinkLocal => "a link-local address",
            Self::UniqueLocal => "a unique-local address",
            Self::Metadata => "the cloud metadata address",
            Self::Unspecified => "an unspecified address",
            Self::SharedAddressSpace => "a shared (carrier-grade NAT) address",
            Self::Multicast => "a multicast address",
            Self::Reserved => "a reserved address",
        }
    }
}

/// Classifies `ip`: `None` for a public address, otherwise why it is not public.
pub fn classify(ip: IpAddr) -> Option<AddressKind> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<AddressKind> {
    let [a, b, c, _] = ip.octets();
    if ip == METADATA_ADDRESS {
        return Some(AddressKind::Metadata);
    }
    let kind = if a == 0 {
        AddressKind::Unspecified
    } else if ip.is_loopback() {
        AddressKind::Loopback
    } else if ip.is_private() {
        AddressKind::Private
    } else if ip.is_link_local() {
        AddressKind::LinkLocal
    } else if a == 100 && (64..128).contains(&b) {
        AddressKind::SharedAddressSpace
    } else if ip.is_multicast() {
        AddressKind::Multicast
    } else if ip.is_broadcast()
        || a >= 240
        || (a == 192 && b == 0 && c == 0)
        || (a == 192 && b == 0 && c == 2)
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
        || (a == 198 && (b == 18 || b == 19))
    {
        AddressKind::Reserved
    } else {
        return None;
    };
    Some(kind)
}

fn classify_v6(ip: Ipv6Addr) -> Option<AddressKind> {
    // Addresses that embed an IPv4 address are judged by it: IPv4-mapped (::ffff:a.b.c.d),
    // NAT64 (64:ff9b::a.b.c.d) and 6to4 (2002:aabb:ccdd::).
    if let Some(v4) = ip.to_ipv4_mapped() {
        return classify_v4(v4);
    }
    let s = ip.segments();
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        return classify_v4(Ipv4Addr::new(
            (s[6] >> 8) as u8,
            s[6] as u8,
            (s[7] >> 8) as u8,
            s[7] as u8,
        ));
    }
    if s[0] == 0x2002 {
        let embedded = Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
        if let Some(kind) = classify_v4(embedded) {
            return Some(kind);
        }
    }
    let kind = if ip == Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254) {
        AddressKind::Metadata
    } else if ip.is_unspecified() {
        AddressKind::Unspecified
    } else if ip.is_loopback() {
        AddressKind::Loopback
    } else if s[0] & 0xffc0 == 0xfe80 {
        AddressKind::LinkLocal
    } else if s[0] & 0xffc0 == 0xfec0 {
        AddressKind::Private
    } else if s[0] & 0xfe00 == 0xfc00 {
        AddressKind::UniqueLocal
    } else if ip.is_multicast() {
        AddressKind::Multicast
    } else if (s[0] == 0x2001 && s[1] == 0x0db8) || s[0..6] == [0, 0, 0, 0, 0, 0] {
        // Documentation, and the deprecated IPv4-compatible range ::/96.
        AddressKind::Reserved
    } else {
        return None;
    };
    Some(kind)
}

/// An address the guard refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockedAddress {
    /// The address.
    pub address: IpAddr,
    /// Why it is not public.
    pub kind: AddressKind,
}

impl fmt::Display for BlockedAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} is {}", self.address, self.kind.describe())
    }
}

/// Which addresses fetches may connect to. The default guards: only public addresses.
///
/// ```
/// use toolbelt_builtin::web::AddressPolicy;
/// let guarded = AddressPolicy::default();
/// assert!(guarded.check("127.0.0.1".parse().unwrap()).is_err());
/// assert!(guarded.check("169.254.169.254".parse().unwrap()).is_err());
/// let local = AddressPolicy::default().allow("127.0.0.1/32".parse().unwrap());
/// assert!(local.check("127.0.0.1".parse().unwrap()).is_ok());
/// assert!(local.check("127.0.0.2".parse().unwrap()).is_err());
/// ```
#[derive(Debug, Clone)]
pub struct AddressPolicy {
    guard: bool,
    allowed: Vec<IpNet>,
}

impl Default for AddressPolicy {
    fn default() -> Self {
        Self {
            guard: true,
            allowed: Vec::new(),
        }
    }
}

impl AddressPolicy {
    /// The guard off: every address is allowed. Only for fetchers that never see a URL an
    /// untrusted party chose.
    pub fn unguarded() -> Self {
        Self {
            guard: false,
            allowed: Vec::new(),
        }
    }

    /// Allows a range that the guard would refuse (`127.0.0.1/32` for a test server,
    /// `10.1.2.0/24` for an intranet).
    pub fn allow(mut self, range: IpNet) -> Self {
        self.allowed.push(range);
        self
    }

    /// Allows one address.
    pub fn allow_ip(self, ip: IpAddr) -> Self {
        self.allow(IpNet::from(ip))
    }

    /// Whether the guard is on.
    pub fn is_guarded(&self) -> bool {
        self.guard
    }

    /// Checks one address.
    pub fn check(&self, ip: IpAddr) -> Result<(), BlockedAddress> {
        if !self.guard {
            return Ok(());
        }
        let ip = match ip {
            // Judge an IPv4-mapped address as the IPv4 address it is, for the allow list too.
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match classify(ip) {
            None => Ok(()),
            Some(_) if self.allowed.iter().any(|net| net.contains(&ip)) => Ok(()),
            Some(kind) => Err(BlockedAddress { address: ip, kind }),
        }
    }
}

/// A host whose every address the guard refused.
#[derive(Debug, Clone)]
pub struct BlockedHost {
    /// The host name.
    pub host: String,
    /// The addresses it resolved to, each refused.
    pub addresses: Vec<BlockedAddress>,
}

impl fmt::Display for BlockedHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let reasons: Vec<String> = self.addresses.iter().map(|a| a.to_string()).collect();
        write!(
            f,
            "{} resolves only to addresses that are not public ({}); fetching internal \
             addresses is not allowed",
            self.host,
            reasons.join(", ")
        )
    }
}

impl std::error::Error for BlockedHost {}

/// A DNS resolver for reqwest that hands the connector only the addresses the policy allows.
///
/// A name with some allowed and some refused addresses is connected through the allowed
/// ones only; a name with none left fails with [`BlockedHost`].
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    policy: Arc<AddressPolicy>,
}

impl GuardedResolver {
    /// A resolver enforcing `policy`.
    pub fn new(policy: AddressPolicy) -> Self {
        Self {
            policy: Arc::new(policy),
        }
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut allowed = Vec::new();
            let mut refused = Vec::new();
            for addr in resolved {
                match policy.check(addr.ip()) {
                    Ok(()) => allowed.push(addr),
                    Err(blocked) => refused.push(blocked),
                }
            }
            if allowed.is_empty() {
                if refused.is_empty() {
                    return Err(format!("{host} did not resolve to any address").into());
                }
                return Err(Box::new(BlockedHost {
                    host,
                    addresses: refused,
                })
                    as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// Finds a [`BlockedHost`] in an error's source chain (reqwest wraps resolver errors).
pub(crate) fn find_blocked_host<'a>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a BlockedHost> {
    let mut current = Some(err);
    while let Some(e) = current {
        if let Some(blocked) = e.downcast_ref::<BlockedHost>() {
            return Some(blocked);
        }
        current = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(ip: &str) -> Option<AddressKind> {
        classify(ip.parse().unwrap())
    }

    #[test]
    fn internal_ranges_are_classified() {
        assert_eq!(kind("127.0.0.1"), Some(AddressKind::Loopback));
        assert_eq!(kind("127.8.9.10"), Some(AddressKind::Loopback));
        assert_eq!(kind("10.0.0.1"), Some(AddressKind::Private));
        assert_eq!(kind("172.31.255.255"), Some(AddressKind::Private));
        assert_eq!(kind("192.168.1.1"), Some(AddressKind::Private));
        assert_eq!(kind("169.254.169.254"), Some(AddressKind::Metadata));
        assert_eq!(kind("169.254.1.1"), Some(AddressKind::LinkLocal));
        assert_eq!(kind("0.0.0.0"), Some(AddressKind::Unspecified));
        assert_eq!(
            kind("100.100.100.200"),
            Some(AddressKind::SharedAddressSpace)
        );
        assert_eq!(kind("255.255.255.255"), Some(AddressKind::Reserved));
        assert_eq!(kind("::1"), Some(AddressKind::Loopback));
        assert_eq!(kind("fe80::1"), Some(AddressKind::LinkLocal));
        assert_eq!(kind("fd12:3456::1"), Some(AddressKind::UniqueLocal));
        assert_eq!(kind("fd00:ec2::254"), Some(AddressKind::Metadata));
        assert_eq!(kind("::"), Some(AddressKind::Unspecified));
    }

    #[test]
    fn embedded_ipv4_addresses_are_judged_by_the_ipv4_address() {
        assert_eq!(kind("::ffff:127.0.0.1"), Some(AddressKind::Loopback));
        assert_eq!(kind("::ffff:169.254.169.254"), Some(AddressKind::Metadata));
        assert_eq!(kind("64:ff9b::10.0.0.1"), Some(AddressKind::Private));
        assert_eq!(kind("2002:7f00:1::"), Some(AddressKind::Loopback));
    }

    #[test]
    fn public_addresses_pass() {
        for ip in ["93.184.215.14", "8.8.8.8", "172.32.0.1", "2606:4700::1111"] {
            assert_eq!(kind(ip), None, "{ip}");
        }
    }

    #[test]
    fn an_allowed_range_admits_only_itself() {
        let policy = AddressPolicy::default().allow("10.1.0.0/16".parse().unwrap());
        assert!(policy.check("10.1.2.3".parse().unwrap()).is_ok());
        let err = policy.check("10.2.0.1".parse().unwrap()).unwrap_err();
        assert_eq!(err.to_string(), "10.2.0.1 is a private network address");
        let mapped = AddressPolicy::default().allow_ip("127.0.0.1".parse().unwrap());
        assert!(mapped.check("::ffff:127.0.0.1".parse().unwrap()).is_ok());
    }

    #[test]
    fn unguarded_allows_everything() {
        let policy = AddressPolicy::unguarded();
        assert!(policy.check(IpAddr::V4(METADATA_ADDRESS)).is_ok());
    }
}
