//! The task supervisor (`megha-task-exec`) driven directly over its socket, as the
//! worker drives it (worker::exec::wire), as root: what it does when the worker
//! goes away, and its `join-exec` start (the cgroup v2 path).

use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;
use worker::exec::helper::processes_with;
use worker::exec::limits::{Limits, RunLimits};
use worker::exec::wire::{self, Event, Order, Report, Spec};

/// Task uids of these tests (those of containment.rs: no account has them).
const UIDS: (u32, u32) = (3_100_000, 3_100_063);

fn need_root() {
    assert_eq!(
        rustix::process::geteuid().as_raw(),
        0,
        "these tests switch task users and make cgroups: run them as root (CI does)"
    );
}

/// A supervisor and the worker's end of its socket.
fn supervisor() -> (OwnedFd, std::process::Child) {
    let (ours, theirs) = wire::pair().expect("socket");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_megha-task-exec"))
        .env_clear()
        .stdin(theirs)
        .spawn()
        .expect("supervisor");
    (ours, child)
}

/// `/dev/null` for writing: the runs' stdout and stderr when nothing reads them.
fn dev_null() -> std::fs::File {
    std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .expect("null")
}

/// `sh -c script` as task uid `uid` in `limits`, output to `out`.
fn sh_spec(script: &str, uid: u32, limits: &RunLimits, v2: bool) -> Spec {
    Spec {
        program: "sh".into(),
        args: vec!["-c".into(), script.into()],
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        cwd: "/".into(),
        uid: Some(uid),
        gid: Some(uid),
        cgroups: limits.cgroups.clone(),
        cgroup_v2: v2,
        address_space: limits.address_space,
    }
}

/// Starts `run` and returns its next report.
fn start(ours: &OwnedFd, run: u64, spec: Spec, out: &std::fs::File) -> Report {
    wire::send(
        ours,
        &Order::Start { run, spec },
        &[out.as_fd(), out.as_fd()],
    )
    .expect("order");
    next(ours, run)
}

fn next(ours: &OwnedFd, run: u64) -> Report {
    let mut buffer = vec![0u8; 4096];
    let (event, _): (Event, _) = wire::recv(ours, &mut buffer)
        .expect("report")
        .expect("open");
    assert_eq!(event.run, run);
    event.report
}

fn remove(limits: &Limits, runs: Vec<RunLimits>) {
    for cg in runs.into_iter().flat_map(|r| r.cgroups) {
        let _ = std::fs::remove_dir(&cg.dir);
    }
    limits.remove();
}

/// The worker's death, as its task supervisor sees it: the socket closes (a real
/// worker's kill -9 is in the tests crate's services_task_containment): both
/// runs, and what they started, are killed.
#[test]
fn when_the_worker_goes_away_its_supervisor_kills_every_run() {
    need_root();
    let limits = Limits::detect(true);
    let (ours, mut supervisor) = supervisor();
    let null = dev_null();
    let mut runs = Vec::new();
    for (run, daemon, main) in [(9_998u64, 613, 611), (9_999, 615, 617)] {
        let run_limits = limits.for_run(run, 64, 500, 64);
        let script = format!("setsid sleep {daemon} & sleep {main}");
        let spec = sh_spec(&script, UIDS.1 - run as u32 % 2, &run_limits, run_limits.v2);
        runs.push(run_limits);
        let report = start(&ours, run, spec, &null);
        assert!(matches!(report, Report::Started { .. }), "{report:?}");
        let needle = format!("sleep {daemon}");
        let mut seen = false;
        for _ in 0..200 {
            if !processes_with(&needle).is_empty() {
                seen = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(seen, "the daemon of run {run} started");
    }
    drop(ours);
    let status = supervisor.wait().expect("supervisor ends");
    println!("supervisor ended: {status}");
    for needle in ["sleep 613", "sleep 611", "sleep 615", "sleep 617"] {
        let left = processes_with(needle);
        assert_eq!(left, Vec::<u32>::new(), "`{needle}` outlived its worker");
    }
    remove(&limits, runs);
}

/// The `join-exec` start (cgroup v2 hosts, and v1 when the supervisor's thread
/// cannot move between cgroups): driven on this host's v1 cgroups, the command is
/// in every run cgroup from its start, as the run's user, and its end comes back.
#[test]
fn a_run_started_through_join_exec_is_in_its_cgroups_as_its_user() {
    need_root();
    let limits = Limits::detect(true);
    let (ours, mut supervisor) = supervisor();
    let out_path = std::env::temp_dir().join(format!("megha-join-exec-{}", std::process::id()));
    let out = std::fs::File::create(&out_path).expect("out");
    let run_limits = limits.for_run(9_997, 64, 500, 64);
    let script = "id -u; cat /proc/self/cgroup; exit 7";
    let spec = sh_spec(script, UIDS.1 - 2, &run_limits, true);
    let started = start(&ours, 9_997, spec, &out);
    assert!(matches!(started, Report::Started { .. }), "{started:?}");
    assert_eq!(next(&ours, 9_997), Report::Exit { code: 7 });
    let text = std::fs::read_to_string(&out_path).expect("output");
    println!("{text}");
    assert_eq!(text.lines().next(), Some((UIDS.1 - 2).to_string().as_str()));
    for cg in &run_limits.cgroups {
        let run_name = cg
            .dir
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let life = cg.dir.parent().and_then(|p| p.file_name()).expect("life");
        let wanted = format!("{}/{run_name}", life.to_string_lossy());
        assert!(
            text.lines().any(|l| l.ends_with(&wanted)),
            "not in {}: {text}",
            cg.dir.display()
        );
    }
    drop(ours);
    let _ = supervisor.wait();
    let _ = std::fs::remove_file(&out_path);
    remove(&limits, vec![run_limits]);
}

/// A frozen worker, as its task supervisor sees it: the socket stays open but no
/// newer lease comes. When the lease runs out the supervisor kills the run (and
/// what it started), starts nothing until a lease in the future comes, and then
/// starts again. (The whole story over the services, with SIGSTOP, is the tests
/// crate's services_worker_frozen.)
#[test]
fn when_the_workers_lease_runs_out_its_supervisor_kills_every_run_and_starts_none() {
    need_root();
    let limits = Limits::detect(true);
    let (ours, mut supervisor) = supervisor();
    let null = dev_null();
    let lease = |ms: u64| {
        let kill_at_ns = Some(wire::monotonic_ns() + ms * 1_000_000);
        wire::send(&ours, &Order::Lease { kill_at_ns }, &[]).expect("lease");
    };
    // A lease well in the future while the run starts, then a short one.
    lease(60_000);
    let run_limits = limits.for_run(9_996, 64, 500, 64);
    let spec = sh_spec(
        "setsid sleep 619 & sleep 621",
        UIDS.1 - 3,
        &run_limits,
        run_limits.v2,
    );
    let report = start(&ours, 9_996, spec.clone(), &null);
    assert!(matches!(report, Report::Started { .. }), "{report:?}");
    lease(300);
    // A supervisor that ignored the lease would let it run for 621 s: wait 10.
    rustix::net::sockopt::set_socket_timeout(
        &ours,
        rustix::net::sockopt::Timeout::Recv,
        Some(Duration::from_secs(10)),
    )
    .expect("receive timeout");
    // Nothing else is said: the run ends, killed, and nothing of it is left.
    assert_eq!(next(&ours, 9_996), Report::Signal { signal: 9 });
    for needle in ["sleep 619", "sleep 621"] {
        assert_eq!(processes_with(needle), Vec::<u32>::new(), "`{needle}` left");
    }
    // No start while the lease is out.
    let refused = start(&ours, 9_995, spec.clone(), &null);
    assert!(
        matches!(&refused, Report::Error { reason } if reason.contains("lease")),
        "{refused:?}"
    );
    // A lease in the future: runs start again.
    lease(60_000);
    let spec = sh_spec("exit 3", UIDS.1 - 3, &run_limits, run_limits.v2);
    assert!(matches!(
        start(&ours, 9_994, spec, &null),
        Report::Started { .. }
    ));
    assert_eq!(next(&ours, 9_994), Report::Exit { code: 3 });
    // No lease at all: never acts on time.
    wire::send(&ours, &Order::Lease { kill_at_ns: None }, &[]).expect("no lease");
    drop(ours);
    supervisor.wait().expect("supervisor ends");
    remove(&limits, vec![run_limits]);
}
