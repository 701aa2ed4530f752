//! Unit tests of `queue.rs`.

use super::*;
use common::reasons::PendingReason;
use common::{ConstraintSet, Micros, Resources, TaskId, TaskSpec};

fn pending(job: u64, queue: u16) -> Box<Pending> {
    pending_of(job, queue, 1)
}

fn pending_of(job: u64, queue: u16, cores: u64) -> Box<Pending> {
    Box::new(Pending {
        task: TaskSpec::short(TaskId::new(job, 0), Resources::cores(cores, 1), Micros(1))
            .with_queue(QueueId(queue)),
        submitted_at: Micros(0),
        attempts: 0,
        reason: None,
        preempting: None,
        contended_since: None,
    })
}

fn drain(q: &mut Queues) -> Vec<u64> {
    std::iter::from_fn(|| q.pop_ready())
        .map(|p| p.pending.task.id.job.0)
        .collect()
}

/// Pops every ready task; those in `fail` are blocked again.
fn pass(q: &mut Queues, fail: &[u64]) -> Vec<u64> {
    let mut tried = Vec::new();
    while let Some(queued) = q.pop_ready() {
        let job = queued.pending.task.id.job.0;
        tried.push(job);
        if fail.contains(&job) {
            q.push_blocked(queued);
        }
    }
    q.sleep_all();
    tried
}

#[test]
fn queues_are_served_round_robin() {
    let mut q = Queues::default();
    for (job, queue) in [(1, 0), (2, 0), (3, 0), (10, 1), (11, 1)] {
        q.push_ready(pending(job, queue));
    }
    assert_eq!(drain(&mut q), vec![1, 10, 2, 11, 3]);
}

#[test]
fn blocked_tasks_wait_for_new_resources_then_go_first() {
    let mut q = Queues::default();
    q.push_ready(pending(1, 0));
    assert_eq!(pass(&mut q, &[1]), vec![1]);
    q.push_ready(pending(2, 0));
    assert_eq!(pass(&mut q, &[2]), vec![2], "1 is blocked");
    q.push_ready(pending(3, 0));
    q.wake_all();
    assert_eq!(q.len(), 3);
    assert_eq!(q.ready_len(), 3);
    assert_eq!(drain(&mut q), vec![1, 2, 3]);
    assert!(q.is_empty());
}

#[test]
fn a_retried_task_keeps_its_place_among_the_blocked() {
    let mut q = Queues::default();
    for job in 1..=4 {
        q.push_ready(pending(job, 0));
    }
    assert_eq!(pass(&mut q, &[1, 2, 3, 4]), vec![1, 2, 3, 4]);
    q.wake_all();
    assert_eq!(
        pass(&mut q, &[1, 3, 4]),
        vec![1, 2, 3, 4],
        "tried once each"
    );
    q.push_ready(pending(5, 0));
    q.wake_all();
    assert_eq!(pass(&mut q, &[]), vec![1, 3, 4, 5]);
    assert!(q.is_empty());
}

#[test]
fn only_woken_classes_are_tried_in_key_order_among_ready_tasks() {
    let mut q = Queues::default();
    // Jobs 1 and 3 ask one core, 2 and 4 two cores; all blocked.
    for (job, cores) in [(1, 1), (2, 2), (3, 1), (4, 2)] {
        q.push_ready(pending_of(job, 0, cores));
    }
    pass(&mut q, &[1, 2, 3, 4]);
    q.push_ready(pending_of(5, 0, 2));
    q.wake((ConstraintSet::EMPTY, Resources::cores(1, 1)));
    assert_eq!(q.ready_len(), 3);
    assert_eq!(pass(&mut q, &[3]), vec![1, 3, 5]);
    assert_eq!(q.len(), 3, "2, 4 asleep; 3 back in its class");
    assert_eq!(q.blocked_len(), 3);
    q.wake_all();
    assert_eq!(pass(&mut q, &[]), vec![2, 3, 4]);
}

#[test]
fn a_class_put_to_sleep_mid_pass_keeps_its_order() {
    let mut q = Queues::default();
    for job in 1..=3 {
        q.push_ready(pending(job, 0));
    }
    pass(&mut q, &[1, 2, 3]);
    let shape = (ConstraintSet::EMPTY, Resources::cores(1, 1));
    q.wake(shape);
    let first = q.pop_ready().expect("task 1");
    assert_eq!(first.pending.task.id.job.0, 1);
    q.push_blocked(first);
    q.sleep(shape, &|_| false);
    assert_eq!(q.pop_ready().map(|p| p.pending.task.id.job.0), None);
    q.sleep_all();
    q.wake_all();
    assert_eq!(drain(&mut q), vec![1, 2, 3]);
}

#[test]
fn a_class_kept_awake_for_one_queue_sleeps_in_the_others() {
    let mut q = Queues::default();
    for (job, queue) in [(1, 0), (2, 1), (3, 0), (4, 1)] {
        q.push_ready(pending(job, queue));
    }
    pass(&mut q, &[1, 2, 3, 4]);
    let shape = (ConstraintSet::EMPTY, Resources::cores(1, 1));
    q.wake(shape);
    q.sleep(shape, &|queue| queue == QueueId(1));
    assert_eq!(pass(&mut q, &[]), vec![2, 4]);
    q.wake_all();
    assert_eq!(drain(&mut q), vec![1, 3]);
}

#[test]
fn a_selective_pass_asks_sleeping_classes_in_key_order_as_their_turn_comes() {
    let one = (ConstraintSet::EMPTY, Resources::cores(1, 1));
    let mut asked = Vec::new();
    let mut q = Queues::default();
    for (job, cores) in [(1, 1), (2, 2), (3, 1), (4, 2)] {
        q.push_ready(pending_of(job, 0, cores));
    }
    pass(&mut q, &[1, 2, 3, 4]);
    q.push_ready(pending_of(5, 0, 2));
    q.start_walk();
    let mut tried = Vec::new();
    while let Some(p) = q.pop_ready_with(&mut |s: &Shape| {
        asked.push(s.1.cpu_millis / 1000);
        if *s == one {
            Probe::Fits
        } else {
            Probe::No
        }
    }) {
        tried.push(p.pending.task.id.job.0);
    }
    q.sleep_all();
    assert_eq!(
        tried,
        vec![1, 3, 5],
        "the one-core class woke, then the new task"
    );
    assert_eq!(asked, vec![1, 2], "each class asked once, in key order");
    assert_eq!(q.woken(), 2);
    q.start_walk();
    let none = q.pop_ready_with(&mut |_: &Shape| Probe::Never);
    q.sleep_all();
    assert!(none.is_none(), "nothing fits: nothing tried");
    assert_eq!(q.len(), 2, "2 and 4 wait (1 and 3 were not blocked again)");
}

#[test]
fn a_cancelled_job_leaves_the_lines_the_classes_and_the_counts() {
    let mut q = Queues::default();
    q.push_ready(pending(1, 0));
    q.push_ready(pending(2, 0));
    pass(&mut q, &[1, 2]);
    q.push_ready(pending(1, 1));
    q.push_ready(pending(3, 1));
    let gone = q.remove_job(JobId(1));
    assert_eq!(gone.len(), 2);
    assert_eq!((q.len(), q.ready_len(), q.blocked_len()), (2, 1, 1));
    q.wake_all();
    assert_eq!(drain(&mut q), vec![2, 3]);
    assert!(q.remove_job(JobId(1)).is_empty());
}

/// Pops every ready task of a pass (bulk misses on) as the GM does: the first
/// task of shape `doomed` tried fails and dooms its class; every task tried is
/// blocked again. Returns (job, or 0 for a count of misses, how many).
fn bulk_pass(q: &mut Queues, doomed: Shape) -> Vec<(u64, usize)> {
    let mut seen = Vec::new();
    while let Some(popped) = q.pop_ready_bulk(&mut |_| Probe::Never) {
        match popped {
            Popped::Task(queued) => {
                seen.push((queued.pending.task.id.job.0, 1));
                if queued.pending.shape() == doomed {
                    q.doom(&doomed, &PendingReason::NoNodeLargeEnough);
                }
                q.push_blocked(queued);
            }
            Popped::Missed { count } => seen.push((0, count)),
        }
    }
    q.sleep_all();
    seen
}

fn bulk_queues() -> Queues {
    let mut q = Queues::default();
    q.set_bulk(true);
    q
}

#[test]
fn a_doomed_class_misses_in_bulk_and_its_tasks_owe_the_attempts() {
    let mut q = bulk_queues();
    // Jobs 1, 2 and 6 of one core, 3, 4, 5 and 7 of two: all blocked.
    for (job, cores) in [(1, 1), (2, 1), (3, 2), (4, 2), (5, 2), (6, 1), (7, 2)] {
        q.push_ready(pending_of(job, 0, cores));
    }
    assert_eq!(pass(&mut q, &[1, 2, 3, 4, 5, 6, 7]).len(), 7);
    let two = (ConstraintSet::EMPTY, Resources::cores(2, 1));
    q.wake_all();
    // 3 fails: 4 and 5 miss before 6 is tried, 7 after it.
    let seen = bulk_pass(&mut q, two);
    assert_eq!(seen, vec![(1, 1), (2, 1), (3, 1), (0, 2), (6, 1), (0, 1)]);
    assert_eq!((q.len(), q.ready_len()), (7, 0));
    assert!(q.take_settled().is_empty(), "nothing left its line yet");
    // The next pass takes them one by one, in line order; each missed task pays.
    q.wake_all();
    let mut order = Vec::new();
    while let Some(queued) = q.pop_ready() {
        let p = &queued.pending;
        let owed = u32::from([4, 5, 7].contains(&p.task.id.job.0));
        assert_eq!(p.attempts, owed, "job {}", p.task.id.job.0);
        if owed == 1 {
            assert_eq!(p.reason, Some(PendingReason::NoNodeLargeEnough));
        }
        order.push(p.task.id.job.0);
    }
    assert_eq!(order, vec![1, 2, 3, 4, 5, 6, 7]);
    let settled: Vec<u64> = q
        .take_settled()
        .iter()
        .map(|(t, n)| t.job.0 * 10 + u64::from(*n))
        .collect();
    assert_eq!(settled, vec![41, 51, 71]);
}

#[test]
fn a_task_blocked_in_the_pass_is_no_miss_and_new_ones_pass_one_by_one() {
    let mut q = bulk_queues();
    let two = (ConstraintSet::EMPTY, Resources::cores(2, 1));
    for job in [1, 2, 3] {
        q.push_ready(pending_of(job, 0, 2));
    }
    assert_eq!(pass(&mut q, &[1, 2, 3]).len(), 3);
    // New tasks: a one-core one (4) and two-core ones (5, 6) behind the blocked.
    for (job, cores) in [(4, 1), (5, 2), (6, 2)] {
        q.push_ready(pending_of(job, 0, cores));
    }
    q.wake_all();
    // 1 fails; 2 and 3 miss before 4, which blocks in a new (sleeping) class;
    // 5 and 6 are ready tasks, tried one by one; nothing is counted twice.
    let seen = bulk_pass(&mut q, two);
    assert_eq!(seen, vec![(1, 1), (0, 2), (4, 1), (5, 1), (6, 1)]);
    assert_eq!((q.len(), q.ready_len()), (6, 0));
    q.wake_all();
    assert_eq!(
        bulk_pass(&mut q, two),
        vec![(1, 1), (0, 2), (4, 1), (0, 2)],
        "the one-core class is no miss: it was not doomed"
    );
}

#[test]
fn misses_are_counted_with_one_queue_only_and_debts_are_paid_at_the_end() {
    let two = (ConstraintSet::EMPTY, Resources::cores(2, 1));
    // Two queues: each turn takes one task, so nothing in bulk.
    let mut q = bulk_queues();
    for (job, queue) in [(1, 0), (2, 0), (3, 1)] {
        q.push_ready(pending_of(job, queue, 2));
    }
    assert_eq!(pass(&mut q, &[1, 2, 3]).len(), 3);
    q.wake_all();
    assert_eq!(bulk_pass(&mut q, two), vec![(3, 1), (1, 1), (2, 1)]);
    // One queue: the first task tried, the others in bulk, the debts paid by
    // settle_all.
    let mut q = bulk_queues();
    for job in [1, 2, 3] {
        q.push_ready(pending_of(job, 0, 2));
    }
    assert_eq!(pass(&mut q, &[1, 2, 3]).len(), 3);
    for _ in 0..3 {
        q.wake_all();
        assert_eq!(bulk_pass(&mut q, two), vec![(1, 1), (0, 2)]);
    }
    let settled = q.settle_all();
    assert_eq!(
        settled,
        vec![(TaskId::new(2, 0), 3), (TaskId::new(3, 0), 3)]
    );
    assert!(q.iter().all(|p| p.attempts == 3 || p.task.id.job.0 == 1));
    assert!(q.settle_all().is_empty(), "paid once");
}

#[test]
fn a_cancelled_task_pays_its_debt_and_the_others_keep_theirs() {
    let two = (ConstraintSet::EMPTY, Resources::cores(2, 1));
    let mut q = bulk_queues();
    for job in 1..=5 {
        q.push_ready(pending_of(job, 0, 2));
    }
    assert_eq!(pass(&mut q, &[1, 2, 3, 4, 5]).len(), 5);
    // Two bulk passes: 1 is tried each time, the others owe 2.
    for _ in 0..2 {
        q.wake_all();
        assert_eq!(bulk_pass(&mut q, two), vec![(1, 1), (0, 4)]);
    }
    // Job 3 leaves (cancelled): its debt paid, the others' unchanged.
    let gone = q.remove_job(common::JobId(3));
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].attempts, 2);
    assert_eq!(q.take_settled(), vec![(TaskId::new(3, 0), 2)]);
    // One more bulk pass, then a new task that owes nothing joins at the back.
    q.wake_all();
    assert_eq!(bulk_pass(&mut q, two), vec![(1, 1), (0, 3)]);
    q.push_ready(pending_of(6, 0, 2));
    assert_eq!(pass(&mut q, &[6]), vec![6]);
    let settled = q.settle_all();
    let want: Vec<(TaskId, u32)> = [2, 4, 5].iter().map(|&j| (TaskId::new(j, 0), 3)).collect();
    assert_eq!(settled, want);
}
