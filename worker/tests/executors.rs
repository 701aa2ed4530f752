//! The real executors, spawning real processes: exit codes, logs, start failures,
//! kills of whole process groups, memory limits (cgroups where the host allows,
//! RLIMIT_AS otherwise) and burn's CPU use.

use common::messages::TaskFailure;
use common::{ExecCommand, Executor, Micros, Resources, TaskId, TaskSpec};
use rustix::process::{test_kill_process_group, Pid};
use rustix::time::{clock_gettime, ClockId};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use worker::exec::limits::Limits;
use worker::exec::logs::Stream;
use worker::exec::{ExecSettings, Executors};

static NEXT: AtomicU32 = AtomicU32::new(0);

fn data_dir() -> PathBuf {
    std::env::temp_dir().join(format!(
        "megha-exec-test-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

/// A data dir removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn executors(cgroups: bool, grace: Duration) -> (Executors, Scratch) {
    let dir = data_dir();
    let ex = Executors::new(ExecSettings {
        grace,
        keep_logs: 100,
        cgroups,
        helper: Some(env!("CARGO_BIN_EXE_megha-task-exec").into()),
        ..ExecSettings::as_self(dir.clone())
    })
    .expect("data dir");
    (ex, Scratch(dir))
}

fn exec(program: &str, args: &[&str]) -> Executor {
    Executor::Exec(Arc::new(ExecCommand {
        program: program.into(),
        args: args.iter().map(|a| a.to_string()).collect(),
        ..Default::default()
    }))
}

fn task(index: u32, memory_mb: u64) -> TaskSpec {
    TaskSpec::short(
        TaskId::new(1, index),
        Resources::cores(1, memory_mb),
        Micros::from_secs(1),
    )
}

async fn run(ex: &mut Executors, task: TaskSpec, executor: Executor) -> Option<TaskFailure> {
    let id = task.id;
    let (run, handle) = ex.launch(task, &executor);
    let failure = handle.await.expect("executor task").failure;
    assert!(ex.ended(id, run), "the run was current");
    failure
}

#[tokio::test]
async fn a_non_zero_exit_fails_with_its_code() {
    let (mut ex, _dir) = executors(false, Duration::from_secs(5));
    let failure = run(&mut ex, task(0, 64), exec("sh", &["-c", "exit 3"])).await;
    assert_eq!(failure, Some(TaskFailure::Exit { code: 3 }));
}

#[tokio::test]
async fn echo_finishes_and_its_stdout_is_kept() {
    let (mut ex, _dir) = executors(false, Duration::from_secs(5));
    let t = task(1, 64);
    let id = t.id;
    let failure = run(&mut ex, t, exec("sh", &["-c", "echo hello; echo oops >&2"])).await;
    assert_eq!(failure, None);
    assert_eq!(
        ex.logs().tail(id, Stream::Stdout, None).expect("stdout"),
        "hello\n"
    );
    assert_eq!(
        ex.logs().tail(id, Stream::Stderr, Some(1)).expect("stderr"),
        "oops\n"
    );
}

#[tokio::test]
async fn a_missing_binary_or_directory_fails_to_start_with_the_reason() {
    let (mut ex, _dir) = executors(false, Duration::from_secs(5));
    let failure = run(&mut ex, task(2, 64), exec("/no/such/megha-binary", &[])).await;
    let Some(TaskFailure::StartFailed { reason }) = failure else {
        panic!("expected a start failure, got {failure:?}");
    };
    assert!(
        reason.contains("/no/such/megha-binary") && reason.contains("No such file"),
        "{reason}"
    );
    let bad_cwd = Executor::Exec(Arc::new(ExecCommand {
        program: "true".into(),
        cwd: Some("/no/such/dir".into()),
        ..Default::default()
    }));
    let failure = run(&mut ex, task(3, 64), bad_cwd).await;
    let Some(TaskFailure::StartFailed { reason }) = failure else {
        panic!("expected a start failure, got {failure:?}");
    };
    assert!(
        reason.contains("working directory /no/such/dir"),
        "{reason}"
    );
}

/// The pid the command printed first on its stdout, once it did.
async fn first_pid(ex: &Executors, task: TaskId) -> i32 {
    for _ in 0..500 {
        if let Ok(text) = ex.logs().tail(task, Stream::Stdout, None) {
            if let Some(pid) = text.lines().next().and_then(|l| l.trim().parse().ok()) {
                return pid;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the command never printed its pid");
}

#[tokio::test]
async fn a_killed_task_leaves_no_process_of_its_group() {
    let grace = Duration::from_millis(300);
    let (mut ex, _dir) = executors(true, grace);
    let t = task(4, 256);
    let id = t.id;
    // The shell and its background child ignore SIGTERM: only SIGKILL ends them.
    let cmd = exec(
        "sh",
        &["-c", "trap '' TERM; echo $$; sleep 1000 & sleep 1000; wait"],
    );
    let (run, handle) = ex.launch(t, &cmd);
    let pgid = Pid::from_raw(first_pid(&ex, id).await).expect("pid");
    assert!(test_kill_process_group(pgid).is_ok(), "the group runs");
    let stopped_at = Instant::now();
    assert!(ex.stop(id), "a running task stops");
    let failure = handle.await.expect("executor task").failure;
    assert!(
        stopped_at.elapsed() >= grace,
        "SIGTERM was ignored, so the end waited for the grace period"
    );
    assert_eq!(
        failure,
        Some(TaskFailure::Signal {
            signal: 9,
            out_of_memory: false
        })
    );
    assert!(!ex.ended(id, run), "a stopped run is not current");
    // Killed members may linger a moment as zombies (their reaper is not us).
    let mut live = live_members(pgid.as_raw_nonzero().get());
    for _ in 0..500 {
        if live.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        live = live_members(pgid.as_raw_nonzero().get());
    }
    assert_eq!(live, Vec::<i32>::new(), "live processes of group {pgid:?}");
    ex.remove_cgroup();
}

/// Processes of process group `pgid` that are not zombies, from /proc.
fn live_members(pgid: i32) -> Vec<i32> {
    let mut live = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...: comm may hold spaces, so split after ')'.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid) && fields[0] != "Z" {
            live.push(pid);
        }
    }
    live
}

/// A single process that doubles a string until it cannot: far over 32 MiB.
fn memory_hog() -> Executor {
    exec(
        "awk",
        &["BEGIN { s = \"x\"; for (i = 0; i < 40; i++) s = s s; print length(s) }"],
    )
}

#[tokio::test]
async fn over_its_memory_limit_a_task_is_killed_by_cgroups_or_stopped_by_rlimit() {
    let (mut ex, _dir) = executors(true, Duration::from_secs(5));
    match ex.limits() {
        Limits::Cgroup { .. } => {
            println!("limits: {}", ex.limits().describe());
            let failure = run(&mut ex, task(5, 32), memory_hog()).await;
            assert_eq!(
                failure,
                Some(TaskFailure::Signal {
                    signal: 9,
                    out_of_memory: true
                }),
                "the cgroup's OOM killer ends it"
            );
            ex.remove_cgroup();
        }
        Limits::Rlimit { why } => {
            println!(
                "cgroups are not available on this host ({why}); checking the rlimit path only"
            );
        }
    }
    // The rlimit path, always: the allocation fails and the task fails.
    let (mut ex, _dir) = executors(false, Duration::from_secs(5));
    assert_eq!(ex.limits().label(), "rlimit");
    let failure = run(&mut ex, task(6, 32), memory_hog()).await;
    assert!(
        failure.is_some(),
        "over RLIMIT_AS the task fails: {failure:?}"
    );
    // The same task with room enough finishes.
    let small = exec(
        "awk",
        &["BEGIN { s = \"x\"; for (i = 0; i < 20; i++) s = s s; print length(s) }"],
    );
    assert_eq!(run(&mut ex, task(7, 256), small).await, None);
}

fn process_cpu() -> Duration {
    let t = clock_gettime(ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

#[tokio::test]
async fn burn_holds_a_cpu_for_its_duration() {
    let (mut ex, _dir) = executors(false, Duration::from_secs(5));
    let t = TaskSpec::short(
        TaskId::new(2, 0),
        Resources::cores(1, 1),
        Micros::from_millis(800),
    );
    let (cpu0, wall0) = (process_cpu(), Instant::now());
    assert_eq!(run(&mut ex, t, Executor::Burn).await, None);
    let (cpu, wall) = (process_cpu() - cpu0, wall0.elapsed());
    println!("burn 1 core x 0.8 s: {cpu:?} CPU in {wall:?}");
    assert!(cpu >= Duration::from_millis(780), "CPU used: {cpu:?}");
    assert!(wall >= Duration::from_millis(780), "took {wall:?}");
    // A stopped burn ends early (generously: long before its 100 s).
    let long = TaskSpec::short(
        TaskId::new(2, 1),
        Resources::cores(1, 1),
        Micros::from_secs(100),
    );
    let (_, handle) = ex.launch(long, &Executor::Burn);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(ex.stop(TaskId::new(2, 1)));
    tokio::time::timeout(Duration::from_secs(30), handle)
        .await
        .expect("a stopped burn ends")
        .expect("executor task");
}

/// A burn by placement (issue 36 item 5) placed off its preferred branch burns its
/// slow duration (a lower bound: it holds however loaded the machine).
#[tokio::test]
async fn a_burn_off_its_preferred_placement_burns_its_slow_duration() {
    let (mut ex, _dir) = executors(false, Duration::from_secs(5));
    let t = TaskSpec::short(
        TaskId::new(4, 0),
        Resources::cores(1, 1),
        Micros::from_millis(10),
    );
    let slow = Executor::BurnByPlacement(common::BurnByPlacement {
        slow_duration: Micros::from_millis(600),
        preferred: false,
    });
    let (cpu0, wall0) = (process_cpu(), Instant::now());
    assert_eq!(run(&mut ex, t, slow).await, None);
    let (cpu, wall) = (process_cpu() - cpu0, wall0.elapsed());
    println!("burn of 10 ms, 600 ms off its branch: {cpu:?} CPU in {wall:?}");
    assert!(cpu >= Duration::from_millis(580), "CPU used: {cpu:?}");
    assert!(wall >= Duration::from_millis(580), "took {wall:?}");
}

/// Two one-core burn tasks on one CPU take about twice as long as one alone (the
/// executor burns CPU-seconds, so co-located work slows it down, as in the Megha
/// prototype). Only lower bounds are asserted: they hold however loaded the machine.
#[tokio::test]
async fn two_burns_on_one_core_take_twice_the_time_of_one() {
    // This thread, and the burn threads it spawns (they inherit it), run on one CPU.
    let allowed = rustix::thread::sched_getaffinity(None).expect("the CPU affinity");
    let core = (0..rustix::thread::CpuSet::MAX_CPU)
        .find(|&c| allowed.is_set(c))
        .expect("a CPU this process may use");
    let mut one = rustix::thread::CpuSet::new();
    one.set(core);
    rustix::thread::sched_setaffinity(None, &one).expect("pinning the test to one CPU");
    let (mut ex, _dir) = executors(false, Duration::from_secs(5));
    let burn = |i| {
        TaskSpec::short(
            TaskId::new(3, i),
            Resources::cores(1, 1),
            Micros::from_millis(400),
        )
    };
    let started = Instant::now();
    assert_eq!(run(&mut ex, burn(0), Executor::Burn).await, None);
    let alone = started.elapsed();
    let (cpu0, started) = (process_cpu(), Instant::now());
    let (_, a) = ex.launch(burn(1), &Executor::Burn);
    let (_, b) = ex.launch(burn(2), &Executor::Burn);
    assert_eq!(a.await.expect("executor task").failure, None);
    assert_eq!(b.await.expect("executor task").failure, None);
    let (cpu, together) = (process_cpu() - cpu0, started.elapsed());
    println!("one burn of 0.4 s alone: {alone:?}; two on CPU {core}: {together:?} ({cpu:?} CPU)");
    assert!(alone >= Duration::from_millis(390), "alone: {alone:?}");
    // 0.8 s of CPU on one CPU cannot take less than 0.8 s.
    assert!(cpu >= Duration::from_millis(780), "CPU used: {cpu:?}");
    assert!(
        together >= Duration::from_millis(780),
        "together: {together:?}"
    );
}
