//! A private CA for the TLS tests (rcgen): the CA and one server certificate for
//! `localhost` and `127.0.0.1`, as PEM files in a directory.

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
}

/// Writes `ca.pem`, and `cert.pem` / `key.pem` for localhost and 127.0.0.1 signed by
/// that CA (named `ca_name`), into `dir`.
pub fn make_pki(dir: &Path, ca_name: &str) -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    std::fs::create_dir_all(dir).expect("pki dir");
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, ca_name);
    let ca = ca_params.self_signed(&ca_key).expect("CA certificate");
    let key = KeyPair::generate().expect("server key");
    let params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .expect("server params");
    let cert = params
        .signed_by(&key, &ca, &ca_key)
        .expect("server certificate");
    let pki = Pki {
        ca: dir.join("ca.pem"),
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
    };
    std::fs::write(&pki.ca, ca.pem()).expect("write ca");
    std::fs::write(&pki.cert, cert.pem()).expect("write cert");
    std::fs::write(&pki.key, key.serialize_pem()).expect("write key");
    pki
}
