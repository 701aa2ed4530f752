//! Carbyne's intra-job scheduler (Pseudocode 1, lines 16-25): given the job's share
//! A_k, its completion time T_k, and the reverse-packed schedule: each stage's tasks
//! placed as late as T_k allows, so that only the tasks that must start now to finish
//! by T_k take the share; the rest of the share is leftover.
//!
//! Stage-level packing, as the paper's Tez implementation does per stage: under A_k a
//! stage runs `width` tasks at once (as many of its demand as fit in A_k), in waves
//! of its duration; T_k is the longest chain of stage lengths. Parallel branches
//! are not made to share A_k with each other when T_k is computed, which makes T_k
//! shorter and so the schedule more eager than the paper's: a job never gives away
//! what it needs, it may keep a little it could have given.

use super::model::JobWork;
use common::{Micros, Resources};

/// What the intra-job scheduler decided for one job.
#[derive(Clone, Debug, PartialEq)]
pub struct IntraPlan {
    /// T_k: when the job would finish under its share, from now.
    pub completion: Micros,
    /// Per runnable task (as in [`JobWork::runnable`]): it must start now.
    pub must_start: Vec<bool>,
}

/// Tasks of `demand` that fit in `share` at once (at least one: a job always
/// progresses).
pub fn width(share: &Resources, demand: &Resources) -> u64 {
    let per = |have: u64, want: u64| match want {
        0 => u64::MAX,
        _ => have / want,
    };
    per(share.cpu_millis, demand.cpu_millis)
        .min(per(share.memory_mb, demand.memory_mb))
        .max(1)
}

/// T_k and the tasks that must start now, for `job` under `share`.
pub fn reverse_pack(job: &JobWork, share: &Resources) -> IntraPlan {
    let len: Vec<Micros> = job
        .stages
        .iter()
        .map(|s| {
            let w = width(share, &s.demand);
            let waves = u64::from(s.remaining).div_ceil(w);
            Micros(waves * s.duration.0)
        })
        .collect();
    let (head, tail) = job.head_tail(&len);
    let completion = head
        .iter()
        .zip(&tail)
        .map(|(h, t)| Micros(h.0 + t.0))
        .max()
        .unwrap_or(Micros::ZERO);
    // Per stage: how many of its runnable tasks may wait. Reversed, the stage ends
    // at T_k less the chain after it, and its waves go back from there; a wave that
    // would start after now may wait.
    let mut postponable: Vec<u64> = job
        .stages
        .iter()
        .enumerate()
        .map(|(s, stage)| {
            let latest_finish = completion.0.saturating_sub(tail[s].0 - len[s].0);
            let later_waves = match stage.duration.0 {
                0 => 0,
                d => latest_finish.div_ceil(d).saturating_sub(1),
            };
            let may_wait = later_waves.saturating_mul(width(share, &stage.demand));
            // The tasks left beyond those that may wait must have started by now;
            // the running ones have.
            let must = u64::from(stage.remaining).saturating_sub(may_wait);
            let running = stage.remaining.saturating_sub(stage.runnable);
            let must_new = must.saturating_sub(u64::from(running));
            u64::from(stage.runnable).saturating_sub(must_new)
        })
        .collect();
    // The last runnable tasks of a stage wait first (a stage's tasks are alike).
    let mut must_start = vec![true; job.runnable.len()];
    for (i, r) in job.runnable.iter().enumerate().rev() {
        if let Some(p) = postponable.get_mut(r.stage) {
            if *p > 0 {
                *p -= 1;
                must_start[i] = false;
            }
        }
    }
    IntraPlan {
        completion,
        must_start,
    }
}
