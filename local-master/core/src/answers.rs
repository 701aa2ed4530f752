//! Launch batches already answered: per GM, the highest sequence number applied
//! (sent in every snapshot, so that the GM knows which deductions it may drop) and
//! the outcomes of its most recent batches, so that a batch sent again (its answer
//! was lost) gets the same answer instead of being applied twice; and per GM the
//! newest life seen, so that a GM's older life (a primary a standby replaced) is
//! fenced: its batches and preemptions are refused. A leaf.

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
    /// Per GM: the newest life seen in a launch batch or preemption request.
    lives: Vec<u64>,
    /// Requests refused because their GM's life was older than one seen.
    refused_older_life: u64,
}

/// A request of a GM life older than one this LM has seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OlderLife {
    pub newest: u64,
}

impl BatchAnswers {
    pub fn new(gms: usize) -> Self {
        BatchAnswers {
            applied: vec![0; gms],
            answered: vec![VecDeque::new(); gms],
            lives: vec![0; gms],
            refused_older_life: 0,
        }
    }

    /// Admits a request of `life` of `gm`, or refuses it (and counts it) if a newer
    /// life of that GM was seen. A newer life forgets the answers of the older one:
    /// its batch numbers start over from its own number, and `applied` is of it.
    /// Life 0 (a GM without a journal) is neither fenced nor fences.
    pub fn admit(&mut self, gm: GmId, life: u64) -> Result<(), OlderLife> {
        let Some(newest) = self.lives.get_mut(gm.index()) else {
            return Ok(());
        };
        if life == 0 {
            return Ok(());
        }
        if life < *newest {
            self.refused_older_life += 1;
            return Err(OlderLife { newest: *newest });
        }
        if life > *newest {
            *newest = life;
            self.applied[gm.index()] = 0;
            self.answered[gm.index()].clear();
        }
        Ok(())
    }

    /// Whether `life` of `gm` is older than one seen (replaced and fenced); life 0
    /// never is.
    pub fn superseded(&self, gm: GmId, life: u64) -> bool {
        life != 0 && self.lives.get(gm.index()).is_some_and(|n| life < *n)
    }

    /// Requests refused because their GM's life was older than one seen.
    pub fn refused_older_life(&self) -> u64 {
        self.refused_older_life
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newer_life_fences_the_older_one_and_forgets_its_answers() {
        let mut a = BatchAnswers::new(2);
        let gm = GmId(1);
        assert_eq!(a.admit(gm, 100), Ok(()));
        a.record(gm, 101, &Vec::new());
        assert!(a.cached(gm, 101).is_some());
        assert_eq!(a.applied()[1], 101);
        // The standby's life: admitted; the old life's answers and numbers go.
        assert_eq!(a.admit(gm, 200), Ok(()));
        assert!(a.cached(gm, 101).is_none());
        assert_eq!(a.applied()[1], 0);
        // The old primary is refused from now on, and counted; the new life is not.
        assert_eq!(a.admit(gm, 100), Err(OlderLife { newest: 200 }));
        assert_eq!(a.admit(gm, 200), Ok(()));
        assert_eq!(a.refused_older_life(), 1);
        // Another GM's lives are its own.
        assert_eq!(a.admit(GmId(0), 5), Ok(()));
        // A GM without a journal (life 0) is not fenced, and fences nothing.
        assert_eq!(a.admit(gm, 0), Ok(()));
        assert_eq!(a.admit(gm, 200), Ok(()));
        assert_eq!(a.refused_older_life(), 1);
    }
}
