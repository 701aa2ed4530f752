//! The `burn` executor (as the Megha prototype's workers do): one busy thread per
//! requested core (rounded up) until the task's CPU-seconds, cores x duration, are
//! consumed, measured on each thread's own CPU clock. Co-located work slows it down
//! (it ends later than its duration) and is slowed down by it.

use common::{Micros, TaskSpec};
use rustix::time::{clock_gettime, ClockId};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

/// (threads, CPU time each thread burns) for a task that burns for `duration`
/// ([`common::Executor::burn_duration`]: its spec's, or its slow one off its
/// preferred placement).
pub fn plan(task: &TaskSpec, duration: Micros) -> (u64, Duration) {
    let millis = task.resources.cpu_millis.max(1);
    let threads = millis.div_ceil(1000);
    // cores x duration, spread evenly over the threads.
    let total_us = u128::from(duration.0) * u128::from(millis) / 1000;
    let each = total_us / u128::from(threads);
    (
        threads,
        Duration::from_micros(u64::try_from(each).unwrap_or(u64::MAX)),
    )
}

/// Burns the task's CPU for `duration`; returns when done or stopped.
pub async fn run(task: &TaskSpec, duration: Micros, stop: oneshot::Receiver<Duration>) {
    let (threads, each) = plan(task, duration);
    let stopped = Arc::new(AtomicBool::new(false));
    let mut done = Vec::new();
    for i in 0..threads {
        let (tx, rx) = oneshot::channel();
        let stopped = stopped.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("burn-{}-{i}", task.id))
            .spawn(move || {
                burn(each, &stopped);
                let _ = tx.send(());
            });
        match spawned {
            Ok(_) => done.push(rx),
            Err(e) => {
                tracing::warn!(task = %task.id, job = task.id.job.0, error = %e, "cannot start a burn thread; burning on fewer")
            }
        }
    }
    let all = futures_util::future::join_all(done);
    tokio::select! {
        _ = all => {}
        Ok(_) = stop => stopped.store(true, Ordering::Relaxed),
    }
}

/// Spins until this thread used `cpu` of CPU time or `stopped` is set.
fn burn(cpu: Duration, stopped: &AtomicBool) {
    let start = thread_cpu();
    let mut x: u64 = 1;
    while thread_cpu().saturating_sub(start) < cpu && !stopped.load(Ordering::Relaxed) {
        for _ in 0..10_000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

fn thread_cpu() -> Duration {
    let t = clock_gettime(ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::{Resources, TaskId};

    #[test]
    fn cores_times_duration_spread_over_whole_threads() {
        let task = |millis, secs| {
            TaskSpec::short(
                TaskId::new(1, 0),
                Resources::new(millis, 1),
                Micros::from_secs(secs),
            )
        };
        let plan = |t: TaskSpec| plan(&t, t.duration);
        assert_eq!(plan(task(1000, 2)), (1, Duration::from_secs(2)));
        assert_eq!(plan(task(2000, 2)), (2, Duration::from_secs(2)));
        assert_eq!(plan(task(500, 2)), (1, Duration::from_secs(1)));
        assert_eq!(plan(task(1500, 2)), (2, Duration::from_millis(1500)));
    }
}
