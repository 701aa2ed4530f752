//! Identifiers. Each is a newtype so that a node index is never mistaken for a GM index.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident($inner:ty), $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
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
