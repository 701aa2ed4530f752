//! Launch batches already answered: per GM, the highest sequence number applied
//! (sent in every snapshot, so that the GM knows which deductions it may drop) and
//! the outcomes of its most recent batches, so that a batch sent again (its answer
//! was lost) gets the same answer instead of being applied twice. A leaf.

use common::messages::LaunchOutcome;
use common::{GmId, TaskId};
use std::collections::VecDeque;

/// The outcome of each request of one launch batch.
pub type BatchOutcomes = Vec<(TaskId, LaunchOutcome)>;

/// How many recent batch answers per GM the LM keeps for retried batches.
const ANSWERS_KEPT: usize = 256;

#[derive(Debug)]
pub struct BatchAnswers {
    applied: Vec<u64>,
    answered: Vec<VecDeque<(u64, BatchOutcomes)>>,
}

impl BatchAnswers {
    pub fn new(gms: usize) -> Self {
        BatchAnswers {
            applied: vec![0; gms],
            answered: vec![VecDeque::new(); gms],
        }
    }

    /// The answer already given to batch `seq` of `gm`, if it is still kept.
    pub fn cached(&self, gm: GmId, seq: u64) -> Option<BatchOutcomes> {
        self.answered
            .get(gm.index())
            .and_then(|a| a.iter().find(|(s, _)| *s == seq))
            .map(|(_, outcomes)| outcomes.clone())
    }

    /// Batch `seq` of `gm` was applied with these outcomes.
    pub fn record(&mut self, gm: GmId, seq: u64, outcomes: &BatchOutcomes) {
        if let Some(last) = self.applied.get_mut(gm.index()) {
            *last = (*last).max(seq);
        }
        if let Some(answered) = self.answered.get_mut(gm.index()) {
            if answered.len() == ANSWERS_KEPT {
                answered.pop_front();
            }
            answered.push_back((seq, outcomes.clone()));
        }
    }

    /// Per GM, the highest batch sequence number applied.
    pub fn applied(&self) -> &[u64] {
        &self.applied
    }
}
