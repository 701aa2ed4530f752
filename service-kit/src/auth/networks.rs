//! The networks a worker may name as its callback URL ([`WorkerNetworks`]), and the
//! check of such a URL ([`CheckedHost`]).

use anyhow::Result;
use std::net::{IpAddr, SocketAddr};

/// The networks a worker's callback URL may lie in (`--worker-networks`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerNetworks(pub Vec<ipnet::IpNet>);

impl WorkerNetworks {
    /// Parses a list of CIDRs (`10.0.0.0/8`) or single addresses.
    pub fn parse(items: &[String]) -> Result<Self> {
        let mut nets = Vec::new();
        for item in items {
            let net = item
                .parse::<ipnet::IpNet>()
                .or_else(|_| item.parse::<IpAddr>().map(ipnet::IpNet::from))
                .map_err(|_| {
                    anyhow::anyhow!("--worker-networks: `{item}` is not a CIDR network or address")
                })?;
            nets.push(net);
        }
        Ok(WorkerNetworks(nets))
    }

    /// Loopback, plus the network of `listen` when it names one address that is not
    /// loopback or unspecified (its /24, or /64 for IPv6).
    pub fn default_for(listen: &str) -> Self {
        let mut nets: Vec<ipnet::IpNet> = vec![
            "127.0.0.0/8".parse().expect("literal"),
            "::1/128".parse().expect("literal"),
        ];
        if let Ok(addr) = listen.parse::<SocketAddr>() {
            let ip = addr.ip();
            if !ip.is_loopback() && !ip.is_unspecified() {
                let prefix = if ip.is_ipv4() { 24 } else { 64 };
                if let Ok(net) = ipnet::IpNet::new(ip, prefix) {
                    nets.push(net.trunc());
                }
            }
        }
        WorkerNetworks(nets)
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        self.0.iter().any(|n| n.contains(&ip))
    }

    /// Checks a callback URL: http(s), and every address its host resolves to lies
    /// in these networks. The error says why. Returns the host and the addresses
    /// checked, for a client pinned to them ([`crate::links::http_client_pinned`]):
    /// a name resolving elsewhere later (DNS rebinding) then changes nothing.
    pub async fn check_url(&self, url: &str) -> Result<CheckedHost, String> {
        let rest = url
            .strip_prefix("http://")
            .or_else(|| url.strip_prefix("https://"))
            .ok_or_else(|| format!("callback url `{url}` must be http:// or https://"))?;
        let authority = rest.split('/').next().unwrap_or_default();
        if authority.contains('@') {
            return Err(format!(
                "callback url `{url}` must not carry user information"
            ));
        }
        let default_port = if url.starts_with("https://") { 443 } else { 80 };
        let target = if authority.rsplit_once(':').is_some_and(|(h, p)| {
            !h.is_empty() && p.parse::<u16>().is_ok() && (!h.contains(':') || h.ends_with(']'))
        }) {
            authority.to_owned()
        } else {
            format!("{authority}:{default_port}")
        };
        let addrs: Vec<SocketAddr> = match tokio::net::lookup_host(target.as_str()).await {
            Ok(a) => a.collect(),
            Err(e) => {
                return Err(format!(
                    "callback url `{url}`: cannot resolve its host: {e}"
                ))
            }
        };
        if addrs.is_empty() {
            return Err(format!(
                "callback url `{url}`: its host resolves to no address"
            ));
        }
        if let Some(bad) = addrs.iter().find(|a| !self.contains(a.ip())) {
            return Err(format!(
                "callback url `{url}`: {} is not in the LM's --worker-networks ({})",
                bad.ip(),
                self.0
                    .iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        let host = target
            .rsplit_once(':')
            .map_or(target.as_str(), |(h, _)| h)
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        Ok(CheckedHost { host, addrs })
    }
}

/// A callback URL's host and the addresses it resolved to when checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedHost {
    pub host: String,
    pub addrs: Vec<SocketAddr>,
}

impl CheckedHost {
    /// True when the host is a name (an IP literal needs no pinning).
    pub fn is_name(&self) -> bool {
        self.host.parse::<IpAddr>().is_err()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn callbacks_must_lie_in_the_worker_networks() {
        let nets = WorkerNetworks::default_for("10.1.2.3:9100");
        assert!(nets.check_url("http://127.0.0.1:9200").await.is_ok());
        assert!(nets.check_url("http://10.1.2.77:9200/").await.is_ok());
        assert!(nets.check_url("http://[::1]:9200").await.is_ok());
        for bad in [
            "http://10.1.3.1:9200",
            "http://8.8.8.8",
            "ftp://127.0.0.1",
            "http://user@127.0.0.1:80",
        ] {
            assert!(nets.check_url(bad).await.is_err(), "{bad}");
        }
        let checked = nets
            .check_url("http://localhost:9200/")
            .await
            .expect("loopback name");
        assert_eq!(checked.host, "localhost");
        assert!(checked.is_name() && !checked.addrs.is_empty());
        assert!(checked
            .addrs
            .iter()
            .all(|a| a.ip().is_loopback() && a.port() == 9200));
        let literal = nets.check_url("http://[::1]:9200").await.expect("literal");
        assert!(!literal.is_name(), "{literal:?}");
        let only =
            WorkerNetworks::parse(&["192.168.0.0/16".into(), "10.0.0.1".into()]).expect("valid");
        assert!(only.contains("10.0.0.1".parse().expect("ip")));
        assert!(!only.contains("127.0.0.1".parse().expect("ip")));
        assert!(WorkerNetworks::parse(&["10.0.0.0/33".into()]).is_err());
        assert_eq!(
            WorkerNetworks::default_for("0.0.0.0:9100").0.len(),
            2,
            "an unspecified listen adds no network"
        );
    }
}
