//! Identifiers. Each is a newtype so that a node index is never mistaken for a GM index.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident($inner:ty), $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[serde(transparent)]
        pub struct $name(pub $inner);

        impl $name {
            /// The id as an index into a dense vector.
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

id_type!(
    /// A Global Master. GM `j` owns partition `j` of every Local Master.
    GmId(u16), "gm"
);
id_type!(
    /// A Local Master (one cluster of worker nodes).
    LmId(u16), "lm"
);
id_type!(
    /// A physical worker node, numbered densely within its Local Master.
    NodeId(u32), "node"
);
id_type!(
    /// A job (a batch of tasks submitted together).
    JobId(u64), "job"
);

impl JobId {
    /// Bits of a job id below the submitting GM's id (the services put the GM id in
    /// the top 16 bits).
    pub const SUBMISSION_BITS: u32 = 48;

    /// The job's place in submission order across GMs: the services number jobs by
    /// their submission time in microseconds (below the GM id), the simulator densely
    /// from 0; either way a smaller key was submitted earlier.
    pub fn submission_key(self) -> u64 {
        self.0 & ((1 << Self::SUBMISSION_BITS) - 1)
    }

    /// The GM that accepted the job, as the services stamp it in the top bits
    /// ([`JobId::stamped`]). The simulator numbers jobs densely, so there every job
    /// reads as GM 0's; only a restarted LM's adoption relies on it (see lm-core
    /// `adopt`), which the simulator does not exercise.
    pub fn accepted_by(self) -> GmId {
        GmId((self.0 >> Self::SUBMISSION_BITS) as u16)
    }

    /// The id of a job GM `gm` accepted at `now` (microseconds), after a job of its
    /// numbered `previous` (if any): the submission time, raised to stay unique and
    /// increasing, below the GM id.
    pub fn stamped(gm: u16, now: u64, previous: Option<JobId>) -> JobId {
        let mask = (1u64 << Self::SUBMISSION_BITS) - 1;
        let floor = previous.map_or(0, |p| p.submission_key() + 1);
        JobId((u64::from(gm) << Self::SUBMISSION_BITS) | ((now & mask).max(floor) & mask))
    }
}
id_type!(
    /// A user queue (fairness). Queue 0 is the default queue.
    QueueId(u16), "queue"
);

/// A task: the job it belongs to and its index within the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TaskId {
    pub job: JobId,
    pub index: u32,
}

impl TaskId {
    pub fn new(job: u64, index: u32) -> Self {
        TaskId {
            job: JobId(job),
            index,
        }
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.job.0, self.index)
    }
}

/// A worker node anywhere in the data center.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct NodeAddr {
    pub lm: LmId,
    pub node: NodeId,
}

impl fmt::Display for NodeAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.lm, self.node)
    }
}

#[cfg(test)]
mod tests {
    use super::JobId;

    #[test]
    fn stamped_job_ids_order_by_submission_across_gms_and_stay_unique() {
        let a = JobId::stamped(0, 1_000, None);
        // The same microsecond again, and a clock that went back: still increasing.
        let b = JobId::stamped(0, 1_000, Some(a));
        let c = JobId::stamped(0, 900, Some(b));
        assert!(a.submission_key() < b.submission_key() && b.submission_key() < c.submission_key());
        let other = JobId::stamped(3, 1_001, None);
        assert_eq!(
            other.0 >> JobId::SUBMISSION_BITS,
            3,
            "GM id in the top bits"
        );
        assert_eq!(other.accepted_by(), super::GmId(3));
        assert_eq!(c.accepted_by(), super::GmId(0));
        assert!(other.0 > c.0, "ids differ by GM");
        assert!(
            other.submission_key() < c.submission_key(),
            "c was stamped 1_002"
        );
        assert_eq!(JobId(42).submission_key(), 42, "the simulator's dense ids");
    }
}
