//! A cluster's private CA (rcgen): what `loadgen certs` writes for the TLS examples
//! (docker-compose.tls.yml, k8s/), and the serving certificate a worker issues
//! itself at start (`worker --tls-issuer-cert/--tls-issuer-key`).
//!
//! - [`ClusterPki::generate`]: a root CA, one server certificate per named role
//!   (its DNS names plus `localhost` and `127.0.0.1`, for healthchecks), and the
//!   **worker issuer**: an intermediate CA whose name constraints permit only IP
//!   addresses in the given networks (and DNS names under `worker.invalid`, which no
//!   resolver answers), so a worker holding its key can mint certificates for worker
//!   addresses and nothing else: not for a GM's or an LM's name.
//! - [`issue_worker_cert`]: a certificate for one IP address signed by the worker
//!   issuer, checked at once against the issuer (so an address outside its networks,
//!   or an issuer this module did not make, fails at start with the reason).
//!
//! Workers are the one role whose addresses are not known beforehand (scaled
//! replicas, pod IPs); every other role gets a certificate for fixed names.

use anyhow::{anyhow, bail, Context as _, Result};
use rcgen::{
    BasicConstraints, CertificateParams, CidrSubnet, DnType, GeneralSubtree, IsCa, KeyPair,
    KeyUsagePurpose, NameConstraints, SanType,
};
use std::net::IpAddr;

/// The subject of the worker issuer (a worker rebuilds the issuer from it and its key).
pub const WORKER_ISSUER_NAME: &str = "megha worker issuer";
/// The only DNS names the worker issuer may certify (a reserved, unresolvable name).
pub const WORKER_ISSUER_DNS: &str = "worker.invalid";

/// A certificate (chain) and its private key, PEM.
#[derive(Clone)]
pub struct Pem {
    pub cert: String,
    pub key: String,
}

/// Shows the certificate, never the key.
impl std::fmt::Debug for Pem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pem")
            .field("cert", &self.cert)
            .field("key", &"<private key>")
            .finish()
    }
}

/// What [`ClusterPki::generate`] makes.
#[derive(Debug)]
pub struct ClusterPki {
    /// The root CA (its key is returned too: keep it offline, or drop it).
    pub ca: Pem,
    /// (name, certificate + key) per server asked for.
    pub servers: Vec<(String, Pem)>,
    /// The name-constrained intermediate workers issue their certificates with.
    pub worker_issuer: Pem,
}

fn ca_params(name: &str) -> Result<CertificateParams> {
    let mut p = CertificateParams::new(Vec::<String>::new())?;
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(p)
}

fn worker_issuer_params(networks: &[ipnet::IpNet]) -> Result<CertificateParams> {
    let mut p = ca_params(WORKER_ISSUER_NAME)?;
    p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    let mut permitted: Vec<GeneralSubtree> = networks
        .iter()
        .map(|n| GeneralSubtree::IpAddress(CidrSubnet::from_addr_prefix(n.addr(), n.prefix_len())))
        .collect();
    permitted.push(GeneralSubtree::DnsName(WORKER_ISSUER_DNS.to_owned()));
    p.name_constraints = Some(NameConstraints {
        permitted_subtrees: permitted,
        excluded_subtrees: Vec::new(),
    });
    Ok(p)
}

fn server_params(hosts: &[String]) -> Result<CertificateParams> {
    let mut p = CertificateParams::new(Vec::<String>::new())?;
    for h in hosts {
        let san = match h.parse::<IpAddr>() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName(
                h.clone()
                    .try_into()
                    .map_err(|e| anyhow!("`{h}` is not a DNS name or IP address: {e}"))?,
            ),
        };
        p.subject_alt_names.push(san);
    }
    if let Some(first) = hosts.first() {
        p.distinguished_name
            .push(DnType::CommonName, first.as_str());
    }
    p.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    p.extended_key_usages = vec![
        rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        rcgen::ExtendedKeyUsagePurpose::ClientAuth,
    ];
    Ok(p)
}

impl ClusterPki {
    /// A root CA named `ca_name`; per `(name, hosts)` a server certificate for
    /// `hosts` plus `localhost` and `127.0.0.1`; and the worker issuer for
    /// `worker_networks` (plus 127.0.0.0/8, for a worker's own healthcheck).
    pub fn generate(
        ca_name: &str,
        servers: &[(String, Vec<String>)],
        worker_networks: &[ipnet::IpNet],
    ) -> Result<ClusterPki> {
        let ca_key = KeyPair::generate()?;
        let ca = ca_params(ca_name)?.self_signed(&ca_key)?;
        let mut out = Vec::new();
        for (name, hosts) in servers {
            if hosts.is_empty() {
                bail!("certificate {name}: no host names");
            }
            let mut all = hosts.clone();
            for extra in ["localhost", "127.0.0.1"] {
                if !all.iter().any(|h| h == extra) {
                    all.push(extra.to_owned());
                }
            }
            let key = KeyPair::generate()?;
            let cert = server_params(&all)
                .with_context(|| format!("certificate {name}"))?
                .signed_by(&key, &ca, &ca_key)?;
            out.push((
                name.clone(),
                Pem {
                    cert: cert.pem(),
                    key: key.serialize_pem(),
                },
            ));
        }
        let mut networks = worker_networks.to_vec();
        let loopback: ipnet::IpNet = "127.0.0.0/8".parse().expect("a CIDR");
        if !networks.contains(&loopback) {
            networks.push(loopback);
        }
        let issuer_key = KeyPair::generate()?;
        let issuer = worker_issuer_params(&networks)?.signed_by(&issuer_key, &ca, &ca_key)?;
        Ok(ClusterPki {
            ca: Pem {
                cert: ca.pem(),
                key: ca_key.serialize_pem(),
            },
            servers: out,
            worker_issuer: Pem {
                cert: issuer.pem(),
                key: issuer_key.serialize_pem(),
            },
        })
    }
}

/// Makes ring the process's rustls provider (idempotent).
pub fn install_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A serving certificate for `ip` (and 127.0.0.1) signed by the worker issuer
/// (`issuer`: its certificate and key, PEM); `cert` holds the leaf then the issuer,
/// the chain a server sends. Fails, saying why, when the result does not verify
/// against the issuer for `ip` (an address outside the issuer's networks, or an
/// issuer not made by [`ClusterPki::generate`]).
pub fn issue_worker_cert(issuer: &Pem, ip: IpAddr) -> Result<Pem> {
    use rustls::client::danger::ServerCertVerifier as _;
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    let issuer_key = KeyPair::from_pem(&issuer.key).context("the issuer's key (PEM)")?;
    // The issuer's subject and key identifier are rebuilt from its name and key
    // (the networks do not matter to the certificates it signs).
    let issuer_cert = worker_issuer_params(&[])?.self_signed(&issuer_key)?;
    let mut hosts = vec![ip.to_string()];
    if ip != IpAddr::from([127, 0, 0, 1]) {
        hosts.push("127.0.0.1".to_owned());
    }
    let key = KeyPair::generate()?;
    let leaf = server_params(&hosts)?.signed_by(&key, &issuer_cert, &issuer_key)?;
    // The check a client makes, with the issuer as the only trust anchor.
    install_provider();
    let anchor = CertificateDer::from_pem_slice(issuer.cert.as_bytes())
        .map_err(|e| anyhow!("the issuer's certificate (PEM): {e}"))?;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(anchor)
        .map_err(|e| anyhow!("the issuer's certificate: {e}"))?;
    let verifier = rustls::client::WebPkiServerVerifier::builder(roots.into())
        .build()
        .map_err(|e| anyhow!("{e}"))?;
    verifier
        .verify_server_cert(
            leaf.der(),
            &[],
            &ServerName::IpAddress(ip.into()),
            &[],
            UnixTime::now(),
        )
        .map_err(|e| {
            anyhow!(
                "a certificate for {ip} issued with it does not verify ({e}): the issuer must come from `loadgen certs` and its networks must hold {ip}"
            )
        })?;
    Ok(Pem {
        cert: format!("{}{}", leaf.pem(), issuer.cert),
        key: key.serialize_pem(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::client::danger::ServerCertVerifier as _;
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

    fn pki() -> ClusterPki {
        ClusterPki::generate(
            "test CA",
            &[("gm".into(), vec!["megha-gm-0.megha-gm".into()])],
            &["10.0.0.0/8".parse().expect("cidr")],
        )
        .expect("pki")
    }

    /// Verifies `chain` (leaf first) for `name` with only `ca` trusted, as a client
    /// of the cluster does.
    fn verify(ca: &str, chain: &str, name: &str) -> Result<(), rustls::Error> {
        crate::tls::install_provider();
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(ca.as_bytes()).expect("ca"))
            .expect("add");
        let verifier = rustls::client::WebPkiServerVerifier::builder(roots.into())
            .build()
            .expect("verifier");
        let certs: Vec<CertificateDer> = CertificateDer::pem_slice_iter(chain.as_bytes())
            .collect::<Result<_, _>>()
            .expect("chain");
        verifier
            .verify_server_cert(
                &certs[0],
                &certs[1..],
                &ServerName::try_from(name.to_owned()).expect("name"),
                &[],
                UnixTime::now(),
            )
            .map(drop)
    }

    #[test]
    fn server_certificates_verify_for_their_names_and_localhost_only() {
        let p = pki();
        let gm = &p.servers[0].1;
        for name in ["megha-gm-0.megha-gm", "localhost", "127.0.0.1"] {
            verify(&p.ca.cert, &gm.cert, name).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        assert!(verify(&p.ca.cert, &gm.cert, "megha-lm-0.megha-lm").is_err());
    }

    #[test]
    fn a_worker_certificate_verifies_for_its_address_through_the_issuer() {
        let p = pki();
        let ip: IpAddr = "10.1.2.3".parse().expect("ip");
        let w = issue_worker_cert(&p.worker_issuer, ip).expect("issued");
        verify(&p.ca.cert, &w.cert, "10.1.2.3").expect("its address");
        verify(&p.ca.cert, &w.cert, "127.0.0.1").expect("its healthcheck");
        assert!(verify(&p.ca.cert, &w.cert, "10.1.2.4").is_err());
    }

    #[test]
    fn the_worker_issuer_cannot_certify_a_name_or_an_address_outside_its_networks() {
        let p = pki();
        // Outside 10.0.0.0/8: refused at issue time, saying why.
        let err = issue_worker_cert(&p.worker_issuer, "192.168.1.1".parse().expect("ip"))
            .expect_err("outside the networks");
        assert!(format!("{err:#}").contains("192.168.1.1"), "{err:#}");
        // A holder of the issuer's key minting a GM's name by hand: clients refuse it
        // (the name constraints are checked on the chain, not just by our issuer).
        let issuer_key = KeyPair::from_pem(&p.worker_issuer.key).expect("key");
        let issuer = worker_issuer_params(&[])
            .expect("params")
            .self_signed(&issuer_key)
            .expect("issuer");
        let key = KeyPair::generate().expect("key");
        let forged = server_params(&["megha-gm-0.megha-gm".into()])
            .expect("params")
            .signed_by(&key, &issuer, &issuer_key)
            .expect("forged");
        let chain = format!("{}{}", forged.pem(), p.worker_issuer.cert);
        let err = verify(&p.ca.cert, &chain, "megha-gm-0.megha-gm").expect_err("refused");
        assert!(format!("{err:?}").contains("NameConstraint"), "{err:?}");
        // Sanity: the same forgery for an allowed address would pass, so the refusal
        // above is the name constraint's.
        let allowed = server_params(&["10.9.9.9".into()])
            .expect("params")
            .signed_by(&key, &issuer, &issuer_key)
            .expect("allowed");
        let chain = format!("{}{}", allowed.pem(), p.worker_issuer.cert);
        verify(&p.ca.cert, &chain, "10.9.9.9").expect("an allowed address");
    }
}
