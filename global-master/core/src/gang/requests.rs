//! The requests of a gang's transaction (split from `mod.rs`): one step of it for
//! one LM's part, and how an answer reads in a gang's "why". A leaf.

use super::types::Gang;
use common::messages::{GangOp, GangOutcome, GangRequest};
use common::protocol::GmToLm;
use common::{GmId, JobId, LmId};

pub(super) fn describe(outcome: &GangOutcome) -> String {
    match outcome {
        GangOutcome::Refused(reasons) => match reasons.first() {
            Some((task, reason)) => format!("{task}: {reason}"),
            None => "refused".into(),
        },
        other => other.label().into(),
    }
}

/// The stop of gang `job`'s current generation for one LM (see [`restart`]): it
/// names each member's next run.
pub(super) fn stop_request(gm: GmId, life: u64, lm: LmId, job: JobId, gang: &Gang) -> GmToLm {
    let members = gang.tasks.iter().map(|t| (t.id, t.attempt)).collect();
    let stop = GangOp::Stop { members };
    gang_request(gm, life, lm, job, gang.generation, stop)
}

/// A step of gang `job`'s transaction for one LM's part.
pub(super) fn gang_request(
    gm: GmId,
    life: u64,
    lm: LmId,
    job: JobId,
    generation: u32,
    op: GangOp,
) -> GmToLm {
    GmToLm::Gang(GangRequest {
        gm,
        life,
        lm,
        job,
        generation,
        op,
    })
}

/// The release of `generation`'s part at `lm`.
pub(super) fn release_request(
    gm: GmId,
    life: u64,
    lm: LmId,
    job: JobId,
    generation: u32,
) -> GmToLm {
    gang_request(gm, life, lm, job, generation, GangOp::Release)
}
