//! Containment of what users run (issue 31), at the executors, as root (the tests
//! say so and fail when not): each exec task runs as a uid of its own, with only its
//! documented environment, inside its cgroups from its first instruction, and
//! nothing of it outlives it: not its end, not a cancel, not its worker's death.

use common::messages::TaskFailure;
use common::{ExecCommand, Executor, Micros, Resources, TaskId, TaskSpec};
use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use worker::exec::helper::processes_with;
use worker::exec::identity::IdentityConfig;
use worker::exec::logs::Stream;
use worker::exec::{ExecSettings, Executors};

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Task uids of these tests: no account on a Debian host has them.
const UIDS: (u32, u32) = (3_100_000, 3_100_063);

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn need_root() {
    assert_eq!(
        rustix::process::geteuid().as_raw(),
        0,
        "these tests switch task users and make cgroups: run them as root (CI does)"
    );
}

fn executors(pids_max: u64) -> (Executors, Scratch) {
    need_root();
    let dir = std::env::temp_dir().join(format!(
        "megha-containment-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let ex = Executors::new(ExecSettings {
        grace: Duration::from_millis(300),
        keep_logs: 100,
        identity: IdentityConfig {
            task_uids: Some(UIDS),
            ..IdentityConfig::default()
        },
        pids_max,
        helper: Some(env!("CARGO_BIN_EXE_megha-task-exec").into()),
        ..ExecSettings::as_self(dir.clone())
    })
    .expect("executors");
    assert!(
        matches!(ex.limits(), worker::exec::limits::Limits::Cgroup { .. }),
        "these tests need cgroups (memory, cpu, pids); got {}",
        ex.limits().describe()
    );
    (ex, Scratch(dir))
}

fn sh(script: &str) -> Executor {
    Executor::Exec(Arc::new(ExecCommand {
        program: "sh".into(),
        args: vec!["-c".into(), script.into()],
        ..Default::default()
    }))
}

fn task(index: u32, memory_mb: u64) -> TaskSpec {
    TaskSpec::short(
        TaskId::new(31, index),
        Resources::cores(1, memory_mb),
        Micros::from_secs(1),
    )
}

async fn run(ex: &mut Executors, task: TaskSpec, executor: Executor) -> Option<TaskFailure> {
    let id = task.id;
    let (run, handle) = ex.launch(task, &executor);
    let failure = handle.await.expect("executor task").failure;
    ex.ended(id, run);
    failure
}

async fn stdout_when(ex: &Executors, task: TaskId, mark: &str) -> String {
    for _ in 0..1000 {
        if let Ok(text) = ex.logs().tail(task, Stream::Stdout, None) {
            if text.contains(mark) {
                return text;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "task {task} never printed {mark}; stdout {:?} stderr {:?}",
        ex.logs().tail(task, Stream::Stdout, None),
        ex.logs().tail(task, Stream::Stderr, None)
    );
}

async fn until_none(needle: &str) -> Vec<u32> {
    let mut left = processes_with(needle);
    for _ in 0..300 {
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        left = processes_with(needle);
    }
    left
}

#[tokio::test]
async fn a_task_reaches_nothing_of_the_worker_or_of_other_tasks() {
    let (mut ex, dir) = executors(256);
    // A credential of the worker (as the loopback layout keeps them: 0600, root).
    let secret = dir.0.join("cluster-secret.toml");
    std::fs::write(&secret, "token = \"worker-secret\"\n").expect("secret");
    std::fs::set_permissions(&secret, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    // Task 0 keeps a file in its directory and runs while task 1 pries.
    let victim = task(0, 64);
    let victim_id = victim.id;
    let (victim_run, victim_handle) = ex.launch(
        victim,
        &sh("echo victim-secret > mine; echo victim-log; echo ready; sleep 30"),
    );
    stdout_when(&ex, victim_id, "ready").await;
    let victim_dir = ex.logs().dir(victim_id);
    let me = std::process::id();
    let targets = [
        secret.display().to_string(),
        format!("/proc/{me}/environ"),
        format!("/proc/{me}/cwd/"),
        victim_dir.join("work/mine").display().to_string(),
        victim_dir.join("stdout").display().to_string(),
        dir.0.join("lock").display().to_string(),
        dir.0.join("tasks").display().to_string(),
    ];
    let probe: String = targets
        .iter()
        .map(|t| {
            // A file is read with cat, a directory listed with ls.
            let how = if t.ends_with('/') || t.ends_with("tasks") {
                "ls"
            } else {
                "cat"
            };
            format!("if {how} {t} >/dev/null 2>&1; then echo READ {t}; else echo DENIED {t}; fi; ")
        })
        .collect();
    let script =
        format!("id -u; id -G; env | cut -d= -f1 | sort | tr '\\n' ' '; echo; {probe} echo done");
    let prier = task(1, 64);
    let prier_id = prier.id;
    let failure = run(&mut ex, prier, sh(&script)).await;
    assert_eq!(
        failure,
        None,
        "{:?}",
        ex.logs().tail(prier_id, Stream::Stderr, None)
    );
    let out = stdout_when(&ex, prier_id, "done").await;
    println!("what the task got:\n{out}");
    let mut lines = out.lines();
    let uid: u32 = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .expect("uid");
    assert!(
        (UIDS.0..=UIDS.1).contains(&uid),
        "task uid {uid} is not a task uid"
    );
    let groups = lines.next().expect("groups");
    assert_eq!(
        groups.trim(),
        uid.to_string(),
        "no supplementary group is kept"
    );
    let env: BTreeSet<&str> = lines.next().expect("env").split_whitespace().collect();
    // The task's own variables, and those the shell sets itself.
    let allowed: BTreeSet<&str> = worker::exec::process::TASK_VARIABLES
        .into_iter()
        .chain(["PWD", "SHLVL", "_", "OLDPWD"])
        .collect();
    assert!(
        env.is_subset(&allowed),
        "the task saw variables of the worker: {:?}",
        env.difference(&allowed).collect::<Vec<_>>()
    );
    let read: Vec<&str> = out.lines().filter(|l| l.starts_with("READ ")).collect();
    assert!(read.is_empty(), "the task reached: {read:?}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("DENIED ")).count(),
        targets.len()
    );
    // The victim's uid differs, and it was not disturbed.
    let victim_uid = std::fs::metadata(victim_dir.join("work"))
        .expect("work")
        .uid();
    assert_ne!(victim_uid, uid, "two running tasks shared a uid");
    assert!(ex.stop(victim_id));
    let _ = victim_handle.await;
    ex.ended(victim_id, victim_run);
    // Logs are the worker's, 0600, and stay; the working directory goes with the
    // run (a later run with the same uid finds nothing of it).
    let log = std::fs::metadata(ex.logs().path(prier_id, Stream::Stdout)).expect("log");
    assert_eq!((log.uid(), log.mode() & 0o777), (0, 0o600));
    assert!(!ex.logs().dir(prier_id).join("work").exists());
}

#[tokio::test]
async fn memory_over_the_limit_anywhere_in_the_task_fails_it_as_out_of_memory() {
    let (mut ex, _dir) = executors(256);
    let touch = "python3 -c 'b = bytearray(512 << 20); print(len(b))'";
    for (i, script) in [format!("{touch} | cat"), format!("{touch} & wait")]
        .into_iter()
        .enumerate()
    {
        let failure = run(&mut ex, task(10 + i as u32, 64), sh(&script)).await;
        assert_eq!(
            failure,
            Some(TaskFailure::Signal {
                signal: 9,
                out_of_memory: true
            }),
            "{script}"
        );
    }
}

#[tokio::test]
async fn a_fork_bomb_stays_within_its_pids_limit_and_goes_with_its_task() {
    let (mut ex, _dir) = executors(48);
    let bomb = task(20, 256);
    let id = bomb.id;
    let (run_no, handle) = ex.launch(
        bomb,
        // The bomb in a subshell: the task's own shell forks once, before the bomb
        // fills the pids limit, and then only execs. (With `b` in the task's shell,
        // that shell forked each element of the first pipeline itself; under load
        // the bomb could fill the limit between the two forks and the shell exited
        // on "Cannot fork", taking the task down: 0 processes left to count.)
        &sh("echo started; (b() { b | b & }; b); exec sleep 1000 # megha-fork-bomb"),
    );
    stdout_when(&ex, id, "started").await;
    let uid = std::fs::metadata(ex.logs().dir(id).join("work"))
        .expect("work")
        .uid();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Another task still runs meanwhile.
    let other = run(&mut ex, task(21, 64), sh("echo fine")).await;
    assert_eq!(other, None);
    // Live ones: a run that held this uid before may leave zombies a moment.
    let count = worker::exec::helper::processes_of_uid(uid)
        .into_iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().next())
                    != Some("Z")
            })
        })
        .count();
    println!("processes of the bomb's uid {uid}: {count}");
    assert!(
        count > 0 && count <= 48,
        "{count} processes against a limit of 48"
    );
    assert!(ex.stop(id));
    let _ = handle.await;
    ex.ended(id, run_no);
    let mut left = worker::exec::helper::processes_of_uid(uid);
    for _ in 0..300 {
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        left = worker::exec::helper::processes_of_uid(uid);
    }
    assert_eq!(left, Vec::<u32>::new(), "processes of the bomb left");
}

#[tokio::test]
async fn after_a_cancel_no_process_of_the_task_is_left() {
    let (mut ex, _dir) = executors(256);
    let t = task(30, 64);
    let id = t.id;
    let (run_no, handle) = ex.launch(t, &sh("setsid sleep 612 & echo started; sleep 600"));
    stdout_when(&ex, id, "started").await;
    assert!(!processes_with("sleep 612").is_empty(), "the daemon runs");
    assert!(ex.stop(id));
    let _ = handle.await;
    ex.ended(id, run_no);
    assert_eq!(until_none("sleep 612").await, Vec::<u32>::new());
    // A command that ends leaves nothing behind either.
    let done = run(&mut ex, task(31, 64), sh("setsid sleep 614 & echo bye")).await;
    assert_eq!(done, None);
    assert_eq!(until_none("sleep 614").await, Vec::<u32>::new());
}

/// The run cgroups under this worker life's memory cgroup.
fn run_cgroups(ex: &Executors) -> BTreeSet<String> {
    let worker::exec::limits::Limits::Cgroup { lives, .. } = ex.limits() else {
        panic!("cgroups expected");
    };
    let memory = &lives
        .iter()
        .find(|(c, _)| *c == "memory")
        .expect("memory")
        .1;
    std::fs::read_dir(memory)
        .expect("life cgroup")
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// A run's cgroup is kept for the next run when the run ended cleanly, and not
/// after an OOM kill (whose counter would then count against the next run), nor
/// after a run that left memory charged to it (a file in /dev/shm).
#[tokio::test]
async fn a_clean_runs_cgroup_serves_the_next_run_and_an_oom_ones_does_not() {
    let (mut ex, _dir) = executors(64);
    assert_eq!(run(&mut ex, task(40, 64), sh("true")).await, None);
    let first = run_cgroups(&ex);
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(run(&mut ex, task(41, 64), sh("echo again")).await, None);
    assert_eq!(
        run_cgroups(&ex),
        first,
        "the same cgroup served the second run"
    );
    let hog = "python3 -c 'b = bytearray(256 << 20); print(len(b))'";
    let oom = run(&mut ex, task(42, 32), sh(hog)).await;
    assert_eq!(
        oom,
        Some(TaskFailure::Signal {
            signal: 9,
            out_of_memory: true
        }),
        "the kept cgroup's limit was rewritten for the smaller run"
    );
    assert!(run_cgroups(&ex).is_empty(), "the OOM run's cgroup went");
    // The next run is not taken for OOM-killed by an old counter.
    assert_eq!(run(&mut ex, task(43, 64), sh("true")).await, None);
    let after = run_cgroups(&ex);
    assert_eq!(after.len(), 1);
    assert!(after.is_disjoint(&first), "a fresh cgroup: {after:?}");
    // Memory left charged (8 MiB in /dev/shm): that cgroup is not handed on.
    let shm = format!("/dev/shm/megha-containment-{}", std::process::id());
    let script = format!("head -c 8388608 /dev/zero > {shm}");
    assert_eq!(run(&mut ex, task(44, 64), sh(&script)).await, None);
    let _ = std::fs::remove_file(&shm);
    assert!(run_cgroups(&ex).is_empty(), "the charged cgroup went");
    ex.remove_cgroup();
}

/// The supervisor killed under a running task: the task is killed (nothing of it
/// left) and reported failed, the loss is counted, and the next task runs under a
/// new supervisor.
#[tokio::test]
async fn a_supervisor_killed_under_a_task_takes_the_task_and_is_replaced() {
    let (mut ex, _dir) = executors(64);
    let id = task(50, 64).id;
    let before = ex.start_latency().count();
    let (run_no, handle) = ex.launch(task(50, 64), &sh("echo up; exec sleep 619"));
    stdout_when(&ex, id, "up").await;
    // The command runs before its supervisor reports the start (it first moves its
    // thread back out of the run's cgroups): killed in between, the run is one
    // that never started for the worker. Killed once the start is reported.
    for _ in 0..1000 {
        if ex.start_latency().count() > before {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let pid = *processes_with("sleep 619").first().expect("the task runs");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let parent: i32 = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(1))
        .and_then(|p| p.parse().ok())
        .expect("ppid");
    let supervisor = rustix::process::Pid::from_raw(parent).expect("pid");
    rustix::process::kill_process(supervisor, rustix::process::Signal::KILL).expect("kill");
    let failure = handle.await.expect("executor task").failure;
    ex.ended(id, run_no);
    assert_eq!(
        failure,
        Some(TaskFailure::Signal {
            signal: 9,
            out_of_memory: false
        })
    );
    assert_eq!(until_none("sleep 619").await, Vec::<u32>::new());
    assert_eq!(ex.supervisors_lost(), 1);
    assert_eq!(run(&mut ex, task(51, 64), sh("true")).await, None);
    ex.remove_cgroup();
}

/// The command holds the run's ids in every slot (real, effective, saved,
/// filesystem), no supplementary group and no capability, so it cannot become
/// root again (the supervisor's spawning thread keeps root as its saved uid while
/// it spawns); the supervisor is still root for the next run.
#[tokio::test]
async fn a_task_holds_its_ids_in_every_slot_and_no_capability() {
    let (mut ex, dir) = executors(64);
    let data = dir.0.display().to_string();
    for index in [60, 61] {
        let script = "grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapAmb|NoNewPrivs):' /proc/self/status; for f in /proc/$$/fd/*; do echo \"FD ${f##*/} $(readlink $f)\"; done; echo done";
        let t = task(index, 64);
        let id = t.id;
        assert_eq!(run(&mut ex, t, sh(script)).await, None);
        let out = stdout_when(&ex, id, "done").await;
        println!("{out}");
        let field = |name: &str| -> Vec<String> {
            out.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}:")))
                .unwrap_or_else(|| panic!("no {name} in {out}"))
                .split_whitespace()
                .map(str::to_owned)
                .collect()
        };
        let uids = field("Uid");
        assert_eq!(uids.len(), 4);
        let uid: u32 = uids[0].parse().expect("uid");
        assert!((UIDS.0..=UIDS.1).contains(&uid), "{uid}");
        assert!(uids.iter().all(|u| *u == uids[0]), "uids {uids:?}");
        let gids = field("Gid");
        assert!(gids.iter().all(|g| *g == uids[0]), "gids {gids:?}");
        assert!(field("Groups").is_empty(), "groups {:?}", field("Groups"));
        for caps in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
            assert_eq!(field(caps), ["0000000000000000"], "{caps}");
        }
        assert_eq!(field("NoNewPrivs"), ["1"]);
        // Nothing the worker or the supervisor opened is inherited beyond stdin,
        // stdout and stderr: no socket (the supervisor's to the worker), no file of
        // the data directory (another run's logs). (Descriptors the worker itself
        // inherited without close-on-exec do pass on: see docs/security.md.)
        for line in out.lines().filter_map(|l| l.strip_prefix("FD ")) {
            let (fd, target) = line.split_once(' ').unwrap_or((line, ""));
            if matches!(fd, "0" | "1" | "2") {
                continue;
            }
            assert!(
                !target.starts_with("socket:") && !target.starts_with(&*data),
                "the task holds descriptor {fd} -> {target}"
            );
        }
    }
    ex.remove_cgroup();
}

/// A program that is not on the task's PATH, or not executable by the task's
/// user, could not start, and says why (the supervisor looks it up itself).
#[tokio::test]
async fn a_missing_or_forbidden_program_could_not_start_with_the_reason() {
    let (mut ex, dir) = executors(64);
    let missing = Executor::Exec(Arc::new(ExecCommand {
        program: "no-such-megha-binary".into(),
        ..Default::default()
    }));
    match run(&mut ex, task(70, 64), missing).await {
        Some(TaskFailure::StartFailed { reason }) => assert!(
            reason.contains("no-such-megha-binary") && reason.contains("No such file"),
            "{reason}"
        ),
        other => panic!("expected a start failure, got {other:?}"),
    }
    // Root's own program (0700): found, but the task's user may not run it.
    let private = dir.0.join("root-only.sh");
    std::fs::write(&private, "#!/bin/sh\necho ran\n").expect("script");
    std::fs::set_permissions(
        &private,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod");
    let forbidden = Executor::Exec(Arc::new(ExecCommand {
        program: private.display().to_string(),
        ..Default::default()
    }));
    match run(&mut ex, task(71, 64), forbidden).await {
        Some(TaskFailure::StartFailed { reason }) => {
            assert!(reason.contains("Permission denied"), "{reason}")
        }
        other => panic!("expected a start failure, got {other:?}"),
    }
    ex.remove_cgroup();
}
