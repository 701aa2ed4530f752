//! What an LM takes into its core at all, before validating it: the readiness rule
//! (a restarted LM takes no request until every worker slot registered again or is
//! known down, so that it places nothing on nodes whose running tasks it does not
//! know yet) and the late-copy rule (a first copy of a launch batch answered busy and
//! not applied is answered busy again: its GM took the batch back and may have placed
//! its tasks elsewhere; a resend, from a GM still in doubt, is applied), and the first
//! start order of a worker's registration (orders numbered below it were sent to an
//! earlier registration, and the worker refuses them). The services and the fault
//! simulator both ask this gate, so they cannot drift apart.

use common::bounded::Bounded;
use common::protocol::{GmToLm, LmToWorker};
use common::GmId;

/// The first start order of a new registration of a worker: the lowest of the start
/// orders held for its slot, else `next` (the LM's next dispatch number,
/// [`crate::LocalMaster::next_dispatch`]). Whatever an earlier registration's stream
/// still carries is numbered below, and the worker refuses it
/// ([`common::messages::WorkerAssignment::orders_from`], worker-core's `OrderFilter`).
pub fn first_of_registration<'a>(held: impl IntoIterator<Item = &'a LmToWorker>, next: u64) -> u64 {
    (held.into_iter())
        .filter_map(|o| match o {
            LmToWorker::Start(s) => Some(s.dispatch.seq),
            _ => None,
        })
        .min()
        .unwrap_or(next)
}

/// Launch batches answered busy that an LM remembers (the newest).
pub const ANSWERED_BUSY_KEPT: usize = 4096;

/// Why the gate turned a request away; nothing of it was applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Not every worker slot registered: `missing` of `slots` are neither
    /// registered nor known down.
    NotReady { missing: usize, slots: usize },
    /// A late first copy of a batch answered busy before and never applied.
    LateCopy { gm: GmId, seq: u64 },
}

/// How many worker slots an LM has, and how many of them are neither registered
/// nor known down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Readiness {
    pub missing: usize,
    pub slots: usize,
}

impl Readiness {
    /// From `(registered, down)` per worker slot.
    pub fn of(slots: impl IntoIterator<Item = (bool, bool)>) -> Self {
        let mut r = Readiness {
            missing: 0,
            slots: 0,
        };
        for (registered, down) in slots {
            r.slots += 1;
            r.missing += usize::from(!registered && !down);
        }
        r
    }

    /// Every slot registered or known down: the LM runs with the workers it has.
    pub fn is_ready(self) -> bool {
        self.missing == 0
    }
}

/// The gate of one LM life (a restarted LM starts with a new one).
#[derive(Debug)]
pub struct Gate {
    answered_busy: Bounded<(GmId, u64)>,
}

impl Default for Gate {
    fn default() -> Self {
        Gate {
            answered_busy: Bounded::new(ANSWERED_BUSY_KEPT),
        }
    }
}

impl Gate {
    /// Batch `seq` of `gm` was answered busy outside the gate (the HTTP layer's
    /// broker backpressure): a late first copy of it is not applied either.
    pub fn answered_busy(&mut self, gm: GmId, seq: u64) {
        self.answered_busy.insert((gm, seq));
    }

    /// Whether `message` may go to the core, given the LM's `readiness`;
    /// `applied(gm, seq)`: whether the core already applied that launch batch (a
    /// batch it applied is answered from its record, never refused here).
    pub fn admit(
        &mut self,
        message: &GmToLm,
        readiness: Readiness,
        applied: impl FnOnce(GmId, u64) -> bool,
    ) -> Result<(), Refusal> {
        let ready = readiness.is_ready();
        if let GmToLm::Launch(b) = message {
            let key = (b.gm, b.seq);
            if !ready {
                self.answered_busy.insert(key);
            } else if !b.resend && self.answered_busy.contains(&key) && !applied(b.gm, b.seq) {
                return Err(Refusal::LateCopy {
                    gm: b.gm,
                    seq: b.seq,
                });
            }
        }
        if ready {
            Ok(())
        } else {
            Err(Refusal::NotReady {
                missing: readiness.missing,
                slots: readiness.slots,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::messages::LaunchBatch;
    use common::LmId;

    fn batch(seq: u64, resend: bool) -> GmToLm {
        GmToLm::Launch(LaunchBatch {
            gm: GmId(0),
            lm: LmId(0),
            life: 0,
            seq,
            resend,
            requests: Vec::new(),
        })
    }

    const READY_SLOTS: [(bool, bool); 2] = [(true, false), (false, true)];
    const NOT_READY_SLOTS: [(bool, bool); 2] = [(true, false), (false, false)];
    const READY: Readiness = Readiness {
        missing: 0,
        slots: 2,
    };
    const NOT_READY: Readiness = Readiness {
        missing: 1,
        slots: 2,
    };

    #[test]
    fn a_batch_answered_busy_is_refused_as_a_late_copy_and_applied_as_a_resend() {
        let mut gate = Gate::default();
        assert_eq!(
            gate.admit(&batch(3, false), NOT_READY, |_, _| false),
            Err(Refusal::NotReady {
                missing: 1,
                slots: 2
            })
        );
        assert_eq!(
            gate.admit(&batch(3, false), READY, |_, _| false),
            Err(Refusal::LateCopy {
                gm: GmId(0),
                seq: 3
            }),
            "the late first copy"
        );
        assert_eq!(
            gate.admit(&batch(3, true), READY, |_, _| false),
            Ok(()),
            "a resend"
        );
        assert_eq!(
            gate.admit(&batch(3, false), READY, |_, _| true),
            Ok(()),
            "applied: answered"
        );
        assert_eq!(
            gate.admit(&batch(4, false), READY, |_, _| false),
            Ok(()),
            "another batch"
        );
    }

    #[test]
    fn a_batch_answered_busy_outside_the_gate_is_refused_later_too() {
        let mut gate = Gate::default();
        gate.answered_busy(GmId(0), 9);
        assert_eq!(
            gate.admit(&batch(9, false), READY, |_, _| false),
            Err(Refusal::LateCopy {
                gm: GmId(0),
                seq: 9
            })
        );
    }

    #[test]
    fn readiness_counts_slots_neither_registered_nor_down() {
        assert_eq!(
            Readiness::of([]),
            Readiness {
                missing: 0,
                slots: 0
            }
        );
        assert_eq!(Readiness::of(NOT_READY_SLOTS), NOT_READY);
        assert_eq!(Readiness::of(READY_SLOTS), READY);
        assert!(READY.is_ready() && !NOT_READY.is_ready());
    }
}
