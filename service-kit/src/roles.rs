//! Per-role credentials: the GM, the LM and the worker each hold a key of their own,
//! so that a worker's credential cannot pose as a GM to an LM (launch, cancel,
//! reconcile) nor as an LM to a worker, and a GM's cannot register a worker slot.
//!
//! A role's credential file (given where the shared secret would be:
//! `--cluster-secret-file` / `MEGHA_CLUSTER_SECRET_FILE`) is TOML:
//!
//! ```toml
//! role = "worker"          # whose key this is
//! key = "..."              # this role's ed25519 private key (seed, 64 hex; secret)
//! [public_keys]            # every role's ed25519 public key (64 hex; public)
//! gm = "..."
//! lm = "..."
//! worker = "..."
//! ```
//!
//! A caller signs each internal request with its key (see
//! [`crate::auth::signed`]) and a callee checks it with the caller's public key, so no
//! process holds another role's key and no credential is ever sent to a callee.
//! `scripts/make-role-credentials.sh DIR` (`loadgen role-credentials DIR`) writes one
//! such file per role. A file holding a bare secret instead keeps the simple mode:
//! one secret every role shares, presents as a bearer header and accepts (then a
//! caller's role is not known, and every holder may act as any role).
//!
//! The earlier form (a bearer `token` per role and `[digests]`) is refused with a
//! reason: its token went to every callee, which could then pose as the caller.

use crate::auth::signed::{Signer, Verifier};
use anyhow::{bail, Context as _, Result};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

/// A role of the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Gm,
    Lm,
    Worker,
}

impl Role {
    pub const ALL: &'static [Role] = &[Role::Gm, Role::Lm, Role::Worker];

    pub fn name(self) -> &'static str {
        match self {
            Role::Gm => "gm",
            Role::Lm => "lm",
            Role::Worker => "worker",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The SHA-256 of a token.
pub fn digest(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RoleFile {
    role: Role,
    key: String,
    public_keys: KeysFile,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysFile {
    gm: String,
    lm: String,
    worker: String,
}

/// A role credential file's content: this role's signing key, and every role's
/// public key.
#[derive(Debug)]
pub struct RoleCredential {
    pub role: Role,
    pub signer: Signer,
    pub verifier: Verifier,
}

impl RoleCredential {
    /// True when `text` is meant as a role credential file (it has a
    /// `[public_keys]` table, or the earlier form's `[digests]`), not a bare shared
    /// secret.
    pub fn looks_like(text: &str) -> bool {
        text.lines()
            .any(|l| matches!(l.trim(), "[public_keys]" | "[digests]"))
    }

    /// Parses a role credential file; errors name the field, never the key.
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        if text.lines().any(|l| l.trim() == "[digests]") {
            bail!(
                "{origin}: a role credential file of the earlier form (a bearer token and [digests]), whose token every callee received and could reuse: make new files with scripts/make-role-credentials.sh (keys that sign each request instead)"
            );
        }
        let file: RoleFile = toml::from_str(text)
            .map_err(|e| anyhow::anyhow!("{}", e.message()))
            .with_context(|| {
                format!(
                    "{origin}: not a role credential file (role, key, [public_keys] gm, lm, worker)"
                )
            })?;
        let mut keys = Vec::new();
        for (role, text) in [
            (Role::Gm, &file.public_keys.gm),
            (Role::Lm, &file.public_keys.lm),
            (Role::Worker, &file.public_keys.worker),
        ] {
            let bytes = unhex(text.trim()).with_context(|| {
                format!("{origin}: public_keys.{role}: 64 hex digits (the {role} role's ed25519 public key)")
            })?;
            keys.push((role, bytes));
        }
        let seed = unhex(file.key.trim())
            .with_context(|| format!("{origin}: key: 64 hex digits (an ed25519 seed)"))?;
        let signer =
            Signer::from_seed(file.role, &seed).with_context(|| format!("{origin}: key"))?;
        let verifier = Verifier::new(keys).with_context(|| format!("{origin}: public_keys"))?;
        if verifier.key_of(file.role) != Some(&signer.public_key()) {
            bail!(
                "{origin}: key: its public key is not public_keys.{} (role = \"{}\"): the key and the public keys come from different runs of make-role-credentials",
                file.role,
                file.role
            );
        }
        Ok(RoleCredential {
            role: file.role,
            signer,
            verifier,
        })
    }

    /// The three files of a new set of role credentials (new random keys), as
    /// (role, TOML text).
    pub fn generate() -> Result<[(Role, String); 3]> {
        let seeds = [
            crate::auth::signed::new_seed()?,
            crate::auth::signed::new_seed()?,
            crate::auth::signed::new_seed()?,
        ];
        let publics = [Role::Gm, Role::Lm, Role::Worker]
            .iter()
            .zip(&seeds)
            .map(|(role, seed)| Ok(hex(&Signer::from_seed(*role, seed)?.public_key())))
            .collect::<Result<Vec<_>>>()?;
        Ok([Role::Gm, Role::Lm, Role::Worker].map(|role| {
            let i = Role::ALL.iter().position(|r| *r == role).unwrap_or(0);
            let text = format!(
                "# megha role credential of the {role} role: give it to {role} processes only\n\
                 # (--cluster-secret-file / MEGHA_CLUSTER_SECRET_FILE); `key` is secret.\n\
                 role = \"{role}\"\nkey = \"{}\"\n\n[public_keys]\ngm = \"{}\"\nlm = \"{}\"\nworker = \"{}\"\n",
                hex(&seeds[i]),
                publics[0],
                publics[1],
                publics[2]
            );
            (role, text)
        }))
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

    #[test]
    fn generated_files_parse_and_hold_only_their_roles_key() {
        let files = RoleCredential::generate().expect("generate");
        let parsed: Vec<_> = files
            .iter()
            .map(|(role, text)| {
                assert!(RoleCredential::looks_like(text));
                let c = RoleCredential::parse(text, "f.toml").expect("valid");
                assert_eq!(c.role, *role);
                c
            })
            .collect();
        for c in &parsed {
            for other in &parsed {
                assert_eq!(
                    c.verifier.key_of(other.role),
                    Some(&other.signer.public_key())
                );
            }
        }
        assert!(!RoleCredential::looks_like("0123456789abcdef0123"));
    }

    #[test]
    fn bad_files_name_the_field_and_never_the_key() {
        let [(_, gm), (_, lm), _] = RoleCredential::generate().expect("generate");
        let line = |t: &str, name: &str| {
            t.lines()
                .find(|l| l.starts_with(&format!("{name} = ")))
                .expect("line")
                .to_owned()
        };
        let lm_pub = line(&gm, "lm");
        let same = gm.replace(&lm_pub, &line(&gm, "gm").replacen("gm = ", "lm = ", 1));
        let key_of = |t: &str| line(t, "key")[7..71].to_owned();
        let swapped = gm.replace(&line(&gm, "key"), &line(&lm, "key"));
        for (text, field) in [
            (swapped, "key"),
            (gm.replace("role = \"gm\"", "role = \"boss\""), "role"),
            (gm.replace(&lm_pub, "lm = \"abc\""), "public_keys.lm"),
            (same, "public_keys"),
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
            assert!(!err.contains(&key_of(&gm)), "{err}");
            assert!(!err.contains(&key_of(&lm)), "{err}");
        }
    }
}
