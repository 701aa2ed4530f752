//! Per-role credentials: the GM, the LM and the worker each hold a token of their
//! own, so that a worker's credential cannot pose as a GM to an LM (launch, cancel,
//! reconcile) nor as an LM to a worker, and a GM's cannot register a worker slot.
//!
//! A role's credential file (given where the shared secret would be:
//! `--cluster-secret-file` / `MEGHA_CLUSTER_SECRET_FILE`) is TOML:
//!
//! ```toml
//! role = "worker"          # whose token this is
//! token = "..."            # presented on this process's calls (secret)
//! [digests]                # SHA-256 (hex) of every role's token (public)
//! gm = "..."
//! lm = "..."
//! worker = "..."
//! ```
//!
//! A callee recognises a caller's role by the SHA-256 of the presented token, so no
//! process holds another role's token; the digests are no secret.
//! `scripts/make-role-credentials.sh DIR` writes one such file per role. A file
//! holding a bare secret instead keeps the simple mode: one secret every role shares
//! and accepts (then a caller's role is not known, and every holder may act as any
//! role).

use anyhow::{bail, Context as _, Result};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

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
    token: String,
    digests: DigestsFile,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DigestsFile {
    gm: String,
    lm: String,
    worker: String,
}

/// The digests of every role's token: who a caller is.
#[derive(Clone, PartialEq, Eq)]
pub struct RoleDigests {
    by_role: [(Role, [u8; 32]); 3],
}

impl std::fmt::Debug for RoleDigests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RoleDigests(gm, lm, worker)")
    }
}

impl RoleDigests {
    /// The role whose token `presented` is, if any (every digest compared, in
    /// constant time each).
    pub fn role_of(&self, presented: &[u8]) -> Option<Role> {
        let d = digest(presented);
        let mut found = None;
        for (role, expected) in &self.by_role {
            if bool::from(expected.ct_eq(&d)) {
                found = Some(*role);
            }
        }
        found
    }
}

/// A role credential file's content: the token and role it holds, and every role's
/// digest.
#[derive(Debug)]
pub struct RoleCredential {
    pub role: Role,
    pub token: String,
    pub digests: RoleDigests,
}

impl RoleCredential {
    /// True when `text` is meant as a role credential file (it has a `[digests]`
    /// table), not a bare shared secret.
    pub fn looks_like(text: &str) -> bool {
        text.lines().any(|l| l.trim() == "[digests]")
    }

    /// Parses a role credential file; errors name the field, never the token.
    pub fn parse(text: &str, origin: &str) -> Result<Self> {
        let file: RoleFile = toml::from_str(text)
            .map_err(|e| anyhow::anyhow!("{}", e.message()))
            .with_context(|| {
                format!(
                    "{origin}: not a role credential file (role, token, [digests] gm, lm, worker)"
                )
            })?;
        let mut by_role = [(Role::Gm, [0u8; 32]); 3];
        for (i, (role, text)) in [
            (Role::Gm, &file.digests.gm),
            (Role::Lm, &file.digests.lm),
            (Role::Worker, &file.digests.worker),
        ]
        .into_iter()
        .enumerate()
        {
            let bytes = unhex(text.trim()).with_context(|| {
                format!("{origin}: digests.{role}: 64 hex digits (the SHA-256 of the {role} token)")
            })?;
            by_role[i] = (role, bytes);
        }
        let digests = RoleDigests { by_role };
        let token = file.token.trim().to_owned();
        if token.len() < crate::auth::MIN_SECRET_LEN {
            bail!(
                "{origin}: token: at least {} characters",
                crate::auth::MIN_SECRET_LEN
            );
        }
        if digests.role_of(token.as_bytes()) != Some(file.role) {
            bail!(
                "{origin}: token: its SHA-256 is not digests.{} (role = \"{}\"): the token and the digests come from different runs of make-role-credentials",
                file.role,
                file.role
            );
        }
        let distinct: std::collections::HashSet<_> =
            digests.by_role.iter().map(|(_, d)| *d).collect();
        if distinct.len() != 3 {
            bail!("{origin}: digests: two roles have the same token; each role needs its own");
        }
        Ok(RoleCredential {
            role: file.role,
            token,
            digests,
        })
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

    fn file(role: &str, token: &str, tokens: [&str; 3]) -> String {
        format!(
            "role = \"{role}\"\ntoken = \"{token}\"\n[digests]\ngm = \"{}\"\nlm = \"{}\"\nworker = \"{}\"\n",
            hex(&digest(tokens[0].as_bytes())),
            hex(&digest(tokens[1].as_bytes())),
            hex(&digest(tokens[2].as_bytes())),
        )
    }

    const T: [&str; 3] = [
        "gm-token-0123456789",
        "lm-token-0123456789",
        "worker-token-0123456789",
    ];

    #[test]
    fn a_callers_role_comes_from_its_tokens_digest() {
        let text = file("worker", T[2], T);
        assert!(RoleCredential::looks_like(&text));
        let c = RoleCredential::parse(&text, "worker.toml").expect("valid");
        assert_eq!(c.role, Role::Worker);
        assert_eq!(c.digests.role_of(T[0].as_bytes()), Some(Role::Gm));
        assert_eq!(c.digests.role_of(T[1].as_bytes()), Some(Role::Lm));
        assert_eq!(c.digests.role_of(T[2].as_bytes()), Some(Role::Worker));
        assert_eq!(c.digests.role_of(b"gm-token-012345678"), None);
        assert!(!format!("{:?}", c.digests).contains("0123"));
        assert!(!RoleCredential::looks_like("0123456789abcdef0123"));
    }

    #[test]
    fn bad_files_name_the_field_and_never_the_token() {
        for (text, field) in [
            (file("gm", T[2], T), "digests.gm"),
            (file("gm", T[0], [T[0], T[0], T[2]]), "digests"),
            (
                file("gm", T[0], T).replace("role = \"gm\"", "role = \"boss\""),
                "role",
            ),
            (
                file("gm", T[0], T).replace(&hex(&digest(T[1].as_bytes())), "abc"),
                "digests.lm",
            ),
            (file("gm", "short", T), "token"),
        ] {
            let err = format!(
                "{:#}",
                RoleCredential::parse(&text, "f.toml").expect_err(field)
            );
            assert!(err.contains(field), "{field}: {err}");
            for t in T {
                assert!(!err.contains(t), "{err}");
            }
        }
    }
}
