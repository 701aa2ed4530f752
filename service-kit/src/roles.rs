//! Per-role credentials: the GM, the LM and the worker each hold a key of their own
//! (each GM and each LM its own, when made per process), so that a worker's
//! credential cannot pose as a GM to an LM (launch, cancel, reconcile) nor as an LM
//! to a worker, a GM's cannot register a worker slot, and LM 1's cannot report as
//! LM 0.
//!
//! A process's credential file (given where the shared secret would be:
//! `--cluster-secret-file` / `MEGHA_CLUSTER_SECRET_FILE`) is TOML:
//!
//! ```toml
//! role = "lm"              # whose key this is
//! id = 1                   # this process's --id (absent: any process of the role)
//! key = "..."              # its ed25519 private key (seed, 64 hex; secret)
//! certificate = "lm.1.<public key>.<signature>"   # the key, certified by the CA
//! ca = "..."               # the cluster credential authority's public key (64 hex)
//! ```
//!
//! A caller signs each internal request with its key and sends its certificate (see
//! [`crate::auth::signed`]); a callee checks both with the CA's public key, so no
//! process holds another's key and no credential is ever sent to a callee.
//! `scripts/make-role-credentials.sh DIR [--gms N --lms N]` (`loadgen
//! role-credentials`) writes the files and the CA key (`ca-key`, to issue more later;
//! no process needs it). A file holding a bare secret instead keeps the simple mode:
//! one secret every role shares, presents as a bearer header and accepts (then a
//! caller's role is not known, and every holder may act as any role).
//!
//! Earlier forms (a bearer `token` per role and `[digests]`; `[public_keys]`) are
//! refused with a reason.

mod role;

pub use role::{digest, hex, Role};

use crate::auth::signed::{Authority, Identity, Signer, Verifier};
use anyhow::{bail, Context as _, Result};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RoleFile {
    role: Role,
    #[serde(default)]
    id: Option<u16>,
    key: String,
    certificate: String,
    ca: String,
}

/// A credential file's content: this process's signing key and certificate, and the
/// cluster authority's public key.
#[derive(Debug)]
pub struct RoleCredential {
    pub role: Role,
    /// The process's number in its role, or `None` for any process of the role.
    pub id: Option<u16>,
    pub signer: Signer,
    pub verifier: Verifier,
}

impl RoleCredential {
    /// True when `text` is meant as a role credential file (a `role = ...` line, or
    /// an earlier form's table), not a bare shared secret.
    pub fn looks_like(text: &str) -> bool {
        text.lines().any(|l| {
            let l = l.trim();
            l.starts_with("role =")
                || l.starts_with("role=")
                || matches!(l, "[public_keys]" | "[digests]")
        })
    }

    /// Parses a role credential file; errors name the field, never the key.
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        if text
            .lines()
            .any(|l| matches!(l.trim(), "[digests]" | "[public_keys]"))
        {
            bail!(
                "{origin}: a role credential file of an earlier form (a bearer token and [digests], or [public_keys]): make new files with scripts/make-role-credentials.sh (a key and a certificate per process)"
            );
        }
        let file: RoleFile = toml::from_str(text)
            .map_err(|e| anyhow::anyhow!("{}", e.message()))
            .with_context(|| {
                format!("{origin}: not a role credential file (role, id, key, certificate, ca)")
            })?;
        let ca = unhex(file.ca.trim()).with_context(|| {
            format!("{origin}: ca: 64 hex digits (the cluster authority's ed25519 public key)")
        })?;
        let seed = unhex(file.key.trim())
            .with_context(|| format!("{origin}: key: 64 hex digits (an ed25519 seed)"))?;
        let signer = Signer::new(&seed, file.certificate.trim(), &ca)
            .map_err(|e| anyhow::anyhow!("{origin}: {e}"))?;
        let who = Identity {
            role: file.role,
            id: file.id,
        };
        if signer.identity() != who {
            bail!(
                "{origin}: certificate: it certifies {}, the file says role = \"{}\"{}",
                signer.identity(),
                file.role,
                file.id.map_or_else(String::new, |i| format!(", id = {i}"))
            );
        }
        Ok(RoleCredential {
            role: file.role,
            id: file.id,
            signer,
            verifier: Verifier::new(ca),
        })
    }

    /// A new credential file's text for `who`: a new key, certified by `authority`.
    pub fn issue(authority: &Authority, who: Identity) -> Result<String> {
        let (seed, signer) = Signer::issue(authority, who)?;
        let id = who.id.map_or_else(
            || format!("# no id: any {} process may use this file\n", who.role),
            |i| format!("id = {i}\n"),
        );
        Ok(format!(
            "# megha credential of {who}: give it to that process only\n\
             # (--cluster-secret-file / MEGHA_CLUSTER_SECRET_FILE); `key` is secret.\n\
             role = \"{}\"\n{id}key = \"{}\"\ncertificate = \"{}\"\nca = \"{}\"\n",
            who.role,
            hex(&seed),
            signer.certificate(),
            hex(&authority.public_key())
        ))
    }
}

/// 32 bytes from 64 hex digits (a SHA-256 written as text).
pub fn unhex(text: &str) -> Result<[u8; 32]> {
    if text.len() != 64 || !text.is_ascii() {
        bail!("expected 64 hex digits");
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn authority() -> Authority {
        Authority::from_seed(&crate::auth::signed::new_seed().expect("seed")).expect("ca")
    }

    fn who(role: Role, id: Option<u16>) -> Identity {
        Identity { role, id }
    }

    #[test]
    fn issued_files_parse_and_hold_only_their_processs_key() {
        let ca = authority();
        for w in [
            who(Role::Gm, Some(0)),
            who(Role::Lm, Some(7)),
            who(Role::Worker, None),
        ] {
            let text = RoleCredential::issue(&ca, w).expect("issue");
            assert!(RoleCredential::looks_like(&text));
            let c = RoleCredential::parse(&text, "f.toml").expect("valid");
            assert_eq!((c.role, c.id), (w.role, w.id));
            assert_eq!(c.verifier.ca(), &ca.public_key());
        }
        assert!(!RoleCredential::looks_like("0123456789abcdef0123"));
    }

    #[test]
    fn bad_files_name_the_field_and_never_the_key() {
        let ca = authority();
        let lm1 = RoleCredential::issue(&ca, who(Role::Lm, Some(1))).expect("issue");
        let lm2 = RoleCredential::issue(&ca, who(Role::Lm, Some(2))).expect("issue");
        let stranger = RoleCredential::issue(&authority(), who(Role::Lm, Some(1))).expect("issue");
        let line = |t: &str, name: &str| {
            t.lines()
                .find(|l| l.starts_with(&format!("{name} = ")))
                .expect("line")
                .to_owned()
        };
        let key_of = |t: &str| line(t, "key")[7..71].to_owned();
        for (text, field) in [
            // Another process's key under this certificate.
            (lm1.replace(&line(&lm1, "key"), &line(&lm2, "key")), "key"),
            // The file claims another id or role than its certificate.
            (lm1.replace("id = 1", "id = 2"), "certificate"),
            (lm1.replace("role = \"lm\"", "role = \"gm\""), "certificate"),
            (lm1.replace("role = \"lm\"", "role = \"boss\""), "role"),
            // Another authority's certificate.
            (
                lm1.replace(&line(&lm1, "ca"), &line(&stranger, "ca")),
                "certificate",
            ),
            (lm1.replace(&line(&lm1, "ca"), "ca = \"abc\""), "ca"),
            (
                "role = \"gm\"\ntoken = \"x\"\n[digests]\ngm = \"\"\n".to_owned(),
                "earlier form",
            ),
        ] {
            let err = format!(
                "{:#}",
                RoleCredential::parse(&text, "f.toml").expect_err(field)
            );
            assert!(err.contains(field), "{field}: {err}");
            assert!(!err.contains(&key_of(&lm1)), "{err}");
            assert!(!err.contains(&key_of(&lm2)), "{err}");
        }
    }
}
