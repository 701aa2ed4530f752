//! TLS for HTTP (rustls with the ring provider), optional: a role serves HTTPS when
//! given `--tls-cert-file` and `--tls-key-file` (PEM), and its clients trust the
//! system roots plus the CA of `--tls-ca-file` (PEM), e.g. a cluster's private CA.
//!
//! - [`TlsSettings::resolve`]: both or neither of cert/key; files readable.
//!   [`TlsSettings::with_issuer`] (workers): no certificate file, but an issuing CA
//!   ([`crate::pki`]) with which [`TlsSettings::issue_for`] makes one at start for
//!   the address the worker advertises.
//! - [`trust_ca`]: adds the CA to every client this process builds afterwards
//!   ([`crate::links::http_client_with`], [`crate::auth::user_client`]); process-wide,
//!   like the system trust store it extends.
//! - [`serve`]: serves a router over plain HTTP or HTTPS until the shutdown future
//!   resolves, with the peer address available to handlers (`ConnectInfo`).

use anyhow::{bail, Context as _, Result};
use axum::serve::ListenerExt as _;
use axum::Router;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// The TLS files of a role.
#[derive(Clone, Debug, Default)]
pub struct TlsSettings {
    /// Certificate chain and key to serve HTTPS; `None`: plain HTTP.
    pub server: Option<ServerCert>,
    /// A CA (PEM) the role's clients trust besides the system roots.
    pub ca: Option<PathBuf>,
}

/// Where the certificate a role serves comes from.
#[derive(Clone, Debug)]
pub enum ServerCert {
    /// `--tls-cert-file` and `--tls-key-file`.
    Files { cert: PathBuf, key: PathBuf },
    /// `--tls-issuer-cert` and `--tls-issuer-key`: issued at start
    /// ([`TlsSettings::issue_for`]).
    Issuer { cert: PathBuf, key: PathBuf },
    /// Issued at start, held in memory only.
    Issued(crate::pki::Pem),
}

impl TlsSettings {
    /// Checks the flags: cert and key together, every file readable.
    pub fn resolve(
        cert: Option<PathBuf>,
        key: Option<PathBuf>,
        ca: Option<PathBuf>,
    ) -> Result<Self> {
        let server = match (cert, key) {
            (Some(cert), Some(key)) => Some(ServerCert::Files { cert, key }),
            (None, None) => None,
            _ => bail!("--tls-cert-file and --tls-key-file go together (HTTPS needs both)"),
        };
        let (cert, key) = match &server {
            Some(ServerCert::Files { cert, key }) => (Some(cert), Some(key)),
            _ => (None, None),
        };
        for (flag, path) in [
            ("--tls-cert-file", cert),
            ("--tls-key-file", key),
            ("--tls-ca-file", ca.as_ref()),
        ] {
            if let Some(p) = path {
                std::fs::metadata(p).with_context(|| format!("{flag} {}", p.display()))?;
            }
        }
        Ok(TlsSettings { server, ca })
    }

    /// Adds `--tls-issuer-cert` / `--tls-issuer-key` (both or neither; not with
    /// `--tls-cert-file`; files readable).
    pub fn with_issuer(mut self, cert: Option<PathBuf>, key: Option<PathBuf>) -> Result<Self> {
        let (cert, key) = match (cert, key) {
            (Some(c), Some(k)) => (c, k),
            (None, None) => return Ok(self),
            _ => bail!("--tls-issuer-cert and --tls-issuer-key go together"),
        };
        if self.server.is_some() {
            bail!("--tls-issuer-cert: give either it (the worker issues its own certificate) or --tls-cert-file, not both");
        }
        for (flag, p) in [("--tls-issuer-cert", &cert), ("--tls-issuer-key", &key)] {
            std::fs::metadata(p).with_context(|| format!("{flag} {}", p.display()))?;
        }
        self.server = Some(ServerCert::Issuer { cert, key });
        Ok(self)
    }

    /// With an issuer: issues the certificate this process serves for the host of
    /// `url` (an IP address: see [`crate::pki::issue_worker_cert`]). Otherwise does
    /// nothing.
    pub fn issue_for(&mut self, url: &str) -> Result<()> {
        let Some(ServerCert::Issuer { cert, key }) = &self.server else {
            return Ok(());
        };
        let read = |flag: &str, p: &Path| {
            std::fs::read_to_string(p).with_context(|| format!("{flag} {}", p.display()))
        };
        let issuer = crate::pki::Pem {
            cert: read("--tls-issuer-cert", cert)?,
            key: read("--tls-issuer-key", key)?,
        };
        let host = reqwest::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().map(|h| h.trim_matches(['[', ']']).to_owned()))
            .with_context(|| format!("--tls-issuer-cert: `{url}` is not a URL"))?;
        let ip: std::net::IpAddr = host.parse().map_err(|_| {
            anyhow::anyhow!(
                "--tls-issuer-cert: a worker issues its certificate for an IP address, so --advertise-url must name one (got `{host}`)"
            )
        })?;
        let issued = crate::pki::issue_worker_cert(&issuer, ip)
            .with_context(|| format!("--tls-issuer-cert {}", cert.display()))?;
        self.server = Some(ServerCert::Issued(issued));
        Ok(())
    }

    /// `https` when serving TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.server.is_some() {
            "https"
        } else {
            "http"
        }
    }
}

/// Makes ring the process's rustls provider (idempotent; defined with the PKI,
/// which sits below this module).
pub use crate::pki::install_provider;

static EXTRA_CA: OnceLock<Vec<reqwest::Certificate>> = OnceLock::new();
static EXTRA_CA_PEM: OnceLock<String> = OnceLock::new();

/// The PEM text of the CA given to [`trust_ca`] (also trusted by `amqps://` links).
pub fn extra_ca_pem() -> Option<&'static str> {
    EXTRA_CA_PEM.get().map(String::as_str)
}

/// Trusts the certificates of the PEM file `path` in every HTTP client built from now
/// on. Call once at start-up, before any client is built.
pub fn trust_ca(path: &Path) -> Result<()> {
    install_provider();
    let pem = std::fs::read(path).with_context(|| format!("--tls-ca-file {}", path.display()))?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem)
        .with_context(|| format!("--tls-ca-file {}: not PEM certificates", path.display()))?;
    if certs.is_empty() {
        bail!("--tls-ca-file {}: no certificate in it", path.display());
    }
    let _ = EXTRA_CA_PEM.set(String::from_utf8_lossy(&pem).into_owned());
    if EXTRA_CA.set(certs).is_err() {
        tracing::warn!("--tls-ca-file given twice in one process; the first one stays");
    }
    Ok(())
}

/// A client builder that trusts the extra CA of [`trust_ca`], if any.
pub fn client_builder() -> reqwest::ClientBuilder {
    install_provider();
    let mut b = reqwest::Client::builder().use_rustls_tls();
    for c in EXTRA_CA.get().into_iter().flatten() {
        b = b.add_root_certificate(c.clone());
    }
    b
}

/// Serves `app` on `listener` (HTTPS with `tls`'s certificate, else plain HTTP) until
/// `shutdown` resolves, then lets open requests finish.
pub async fn serve<F>(
    listener: tokio::net::TcpListener,
    app: Router,
    tls: &TlsSettings,
    shutdown: F,
) -> Result<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    let Some(server) = &tls.server else {
        axum::serve(
            listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            }),
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(shutdown)
        .await?;
        return Ok(());
    };
    install_provider();
    let config = match server {
        ServerCert::Files { cert, key } => {
            axum_server::tls_rustls::RustlsConfig::from_pem_file(cert, key)
                .await
                .with_context(|| {
                    format!(
                        "--tls-cert-file {} / --tls-key-file {}",
                        cert.display(),
                        key.display()
                    )
                })?
        }
        ServerCert::Issued(pem) => axum_server::tls_rustls::RustlsConfig::from_pem(
            pem.cert.clone().into_bytes(),
            pem.key.clone().into_bytes(),
        )
        .await
        .context("the certificate issued with --tls-issuer-cert")?,
        ServerCert::Issuer { cert, .. } => bail!(
            "--tls-issuer-cert {}: no certificate issued yet (TlsSettings::issue_for)",
            cert.display()
        ),
    };
    let handle = axum_server::Handle::new();
    let stopper = handle.clone();
    tokio::spawn(async move {
        shutdown.await;
        stopper.graceful_shutdown(Some(Duration::from_secs(30)));
    });
    axum_server::from_tcp_rustls(listener.into_std()?, config)
        .handle(handle)
        .serve(app.into_make_service_with_connect_info::<SocketAddr>())
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cert_and_key_go_together_and_must_exist() {
        let err = TlsSettings::resolve(Some("a".into()), None, None).expect_err("half");
        assert!(err.to_string().contains("--tls-key-file"), "{err}");
        let err = TlsSettings::resolve(None, None, Some("/nonexistent/ca.pem".into()))
            .expect_err("missing");
        assert!(format!("{err:#}").contains("--tls-ca-file"), "{err:#}");
        let plain = TlsSettings::resolve(None, None, None).expect("plain");
        assert_eq!(plain.scheme(), "http");
    }
}
