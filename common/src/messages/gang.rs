//! The gang transaction's messages (see [`crate::gang`]): GM -> LM
//! [`GangRequest`], LM -> GM [`GangAnswer`].

use super::LmSnapshot;
use crate::gang::{GangOp, GangOutcome};
use crate::{GmId, JobId, LmId};
use serde::{Deserialize, Serialize};

/// One step of a gang's transaction for one LM's part. A gang is its job: one GM
/// owns it, so (`gm`, `job`) names it at every LM.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GangRequest {
    pub gm: GmId,
    /// The sending GM's life ([`super::LaunchBatch::life`]): refused by an LM that
    /// has seen a newer one.
    pub life: u64,
    pub lm: LmId,
    pub job: JobId,
    /// The attempt: increases with every reserve round of the gang. An LM holds at
    /// most one generation of a gang and refuses one older than the newest it saw.
    pub generation: u32,
    pub op: GangOp,
}

/// The LM's answer to a [`GangRequest`], with its state piggybacked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GangAnswer {
    pub lm: LmId,
    pub gm: GmId,
    pub job: JobId,
    pub generation: u32,
    /// What the request was ([`GangOp::label`]).
    pub op: String,
    pub outcome: GangOutcome,
    pub snapshot: LmSnapshot,
}
