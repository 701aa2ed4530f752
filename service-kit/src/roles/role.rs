//! The roles of a cluster (GM, LM, worker), and the digest and hex form their
//! credentials use.

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
