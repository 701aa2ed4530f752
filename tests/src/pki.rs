//! A private CA for the TLS tests ([`service_kit::pki`], as `loadgen certs` makes it):
//! the CA, one server certificate for `localhost` and `127.0.0.1`, and the worker
//! issuer (workers issue their own certificate with it), as PEM files in a directory.

use service_kit::pki::{ClusterPki, Pem};
use std::path::{Path, PathBuf};

/// The PEM files [`make_pki`] writes.
#[derive(Debug, Clone)]
pub struct Pki {
    /// The CA's certificate (what clients trust).
    pub ca: PathBuf,
    /// The server certificate, signed by the CA, for localhost and 127.0.0.1.
    pub cert: PathBuf,
    /// The server certificate's private key.
    pub key: PathBuf,
    /// The worker issuer's certificate (`worker --tls-issuer-cert`).
    pub worker_issuer: PathBuf,
    /// The worker issuer's key (`worker --tls-issuer-key`).
    pub worker_issuer_key: PathBuf,
}

/// Writes `ca.pem`, `cert.pem` / `key.pem` for localhost and 127.0.0.1, and
/// `worker-issuer.pem` / `worker-issuer-key.pem` (loopback addresses only), all
/// under a CA named `ca_name`, into `dir`.
pub fn make_pki(dir: &Path, ca_name: &str) -> Pki {
    std::fs::create_dir_all(dir).expect("pki dir");
    let server = ("server".to_owned(), vec!["localhost".to_owned()]);
    let made = ClusterPki::generate(ca_name, &[server], &[]).expect("test PKI");
    let pki = Pki {
        ca: dir.join("ca.pem"),
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
        worker_issuer: dir.join("worker-issuer.pem"),
        worker_issuer_key: dir.join("worker-issuer-key.pem"),
    };
    let write = |cert: &Path, key: &Path, pem: &Pem| {
        std::fs::write(cert, &pem.cert).expect("write certificate");
        std::fs::write(key, &pem.key).expect("write key");
    };
    write(&pki.cert, &pki.key, &made.servers[0].1);
    write(
        &pki.worker_issuer,
        &pki.worker_issuer_key,
        &made.worker_issuer,
    );
    std::fs::write(&pki.ca, &made.ca.cert).expect("write ca");
    pki
}
