//! Per-task timing: where every microsecond between arrival and start went.
//!
//! Allocation time = start - arrival = framework queuing + processing + worker
//! queuing + communication (Megha section III). The simulator attributes each interval
//! of a task's life to exactly one component as it happens, so the four always add up.

use common::messages::Placement;
use common::{GmId, LmId, Micros, NodeId, QueueId};

/// The final placement decision of a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Pending,
    Internal,
    Repartition,
    /// Sparrow: bound to a worker by late binding.
    LateBinding,
    /// Placed by preempting tasks of a queue over its share (fairness).
    Preemption,
    Unplaceable,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Pending => "pending",
            Decision::Internal => "internal",
            Decision::Repartition => "repartition",
            Decision::LateBinding => "late_binding",
            Decision::Preemption => "preemption",
            Decision::Unplaceable => "unplaceable",
        }
    }

    pub fn from_placement(p: Placement) -> Self {
        match p {
            Placement::Internal => Decision::Internal,
            Placement::Repartition => Decision::Repartition,
        }
    }
}

#[derive(Clone, Debug)]
pub struct TaskRecord {
    pub job: u64,
    pub index: u32,
    pub queue: QueueId,
    pub arrival: Micros,
    pub decision: Decision,
    pub gm: Option<GmId>,
    pub lm: Option<LmId>,
    pub node: Option<NodeId>,
    pub attempts: u32,
    pub rejections: u32,
    /// How many times the task started: once, plus once per preemption.
    pub starts: u32,
    /// Times it was preempted, and the work those runs lost.
    pub preemptions: u32,
    pub lost_work: Micros,
    pub launch: Option<Micros>,
    /// When its room was last secured before it launched: a gang member's part
    /// held at its LM (`None` for other tasks: their launch secures their room).
    pub secured: Option<Micros>,
    pub start: Option<Micros>,
    pub finish: Option<Micros>,
    pub framework_queuing: Micros,
    pub processing: Micros,
    pub worker_queuing: Micros,
    pub communication: Micros,
    /// End of the last attributed interval.
    pub mark: Micros,
    /// Processing of decisions counted in bulk since the mark (known misses, see
    /// `gm_core::KnownMisses`), in the next interval: the interval is split as the
    /// decisions one by one would have split it.
    pub owed_processing: Micros,
}

impl TaskRecord {
    pub fn new(job: u64, index: u32, arrival: Micros) -> Self {
        TaskRecord {
            job,
            index,
            queue: QueueId(0),
            arrival,
            decision: Decision::Pending,
            gm: None,
            lm: None,
            node: None,
            attempts: 0,
            rejections: 0,
            starts: 0,
            preemptions: 0,
            lost_work: Micros::ZERO,
            launch: None,
            secured: None,
            start: None,
            finish: None,
            framework_queuing: Micros::ZERO,
            processing: Micros::ZERO,
            worker_queuing: Micros::ZERO,
            communication: Micros::ZERO,
            mark: arrival,
            owed_processing: Micros::ZERO,
        }
    }

    /// The time since the mark, less the owed processing (booked now).
    fn span(&mut self, t: Micros) -> Micros {
        let span = t.since(self.mark);
        let owed = std::mem::take(&mut self.owed_processing).min(span);
        self.processing += owed;
        span.since(owed)
    }

    /// Time since the mark was spent waiting in a scheduler queue.
    pub fn queued_until(&mut self, t: Micros) {
        if self.start.is_some() {
            return; // allocation time is measured up to the first start
        }
        let span = self.span(t);
        self.framework_queuing += span;
        self.mark = self.mark.max(t);
    }

    /// Time since the mark was spent being processed.
    pub fn processed_until(&mut self, t: Micros) {
        if self.start.is_some() {
            return; // allocation time is measured up to the first start
        }
        let span = self.span(t);
        self.processing += span;
        self.mark = self.mark.max(t);
    }

    /// Time since the mark was spent on the network.
    pub fn in_flight_until(&mut self, t: Micros) {
        if self.start.is_some() {
            return; // allocation time is measured up to the first start
        }
        let span = self.span(t);
        self.communication += span;
        self.mark = self.mark.max(t);
    }

    /// Time since the mark was spent waiting in a worker's queue.
    pub fn worker_queued_until(&mut self, t: Micros) {
        if self.start.is_some() {
            return; // allocation time is measured up to the first start
        }
        let span = self.span(t);
        self.worker_queuing += span;
        self.mark = self.mark.max(t);
    }

    pub fn allocation(&self) -> Option<Micros> {
        self.start.map(|s| s.since(self.arrival))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_add_up_to_the_allocation_time() {
        let mut r = TaskRecord::new(0, 0, Micros(100));
        r.queued_until(Micros(130));
        r.processed_until(Micros(135));
        r.in_flight_until(Micros(635));
        r.worker_queued_until(Micros(700));
        r.start = Some(Micros(700));
        let sum = r.framework_queuing + r.processing + r.communication + r.worker_queuing;
        assert_eq!(Some(sum), r.allocation());
        assert_eq!(r.communication, Micros(500));
    }
}
