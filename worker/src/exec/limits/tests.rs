use super::*;

const OWN: &str = "12:pids:/user.slice\n6:memory:/user.slice\n4:cpu,cpuacct:/user.slice\n0::/user.slice/session-1.scope\n";
const MOUNTS: &str = "\
30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw\n\
33 25 0:29 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n\
34 25 0:30 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct\n\
35 25 0:31 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids\n";

#[test]
fn own_dirs_are_found_per_hierarchy() {
    assert_eq!(
        v1_own_dir(OWN, MOUNTS, "memory"),
        Some(PathBuf::from("/sys/fs/cgroup/memory/user.slice"))
    );
    assert_eq!(
        v1_own_dir(OWN, MOUNTS, "cpu"),
        Some(PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/user.slice"))
    );
    assert_eq!(v1_own_dir(OWN, MOUNTS, "blkio"), None);
    assert_eq!(
        v2_own_dir(OWN, MOUNTS),
        Some(PathBuf::from(
            "/sys/fs/cgroup/unified/user.slice/session-1.scope"
        ))
    );
    // A container's namespace: its mount root is its own cgroup.
    let own = "0::/\n";
    let mounts = "40 30 0:26 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
    assert_eq!(
        v2_own_dir(own, mounts),
        Some(PathBuf::from("/sys/fs/cgroup"))
    );
}

#[test]
fn runs_get_only_the_limited_controllers() {
    let limits = Limits::Cgroup {
        v2: false,
        pool: Pool::default(),
        lives: vec![
            ("memory", PathBuf::from("/m/megha-worker-1")),
            ("cpu", PathBuf::from("/c/megha-worker-1")),
            ("pids", PathBuf::from("/p/megha-worker-1")),
        ],
    };
    let run = limits.for_run(7, 64, 500, 100);
    let dirs: Vec<_> = run.cgroups.iter().map(|c| c.dir.clone()).collect();
    assert_eq!(
        dirs,
        [
            "/m/megha-worker-1/run-7",
            "/c/megha-worker-1/run-7",
            "/p/megha-worker-1/run-7"
        ]
        .map(PathBuf::from)
    );
    assert_eq!(
        run.cgroups[0].settings,
        vec![
            (
                "memory.limit_in_bytes".to_string(),
                (64u64 << 20).to_string()
            ),
            // Its own peak, not a kept cgroup's earlier runs'.
            ("memory.max_usage_in_bytes".to_string(), "0".to_string())
        ]
    );
    assert_eq!(run.cgroups[1].settings[0].1, "-1");
    assert_eq!(
        run.cgroups[1].after_spawn,
        vec![("cpu.cfs_quota_us".to_string(), "50000".to_string())]
    );
    assert_eq!(run.cgroups[2].settings[0].1, "100");
    // cpuacct in a hierarchy of its own: joined, nothing limited there.
    let limits = Limits::Cgroup {
        v2: false,
        pool: Pool::default(),
        lives: vec![
            ("memory", PathBuf::from("/m/w")),
            ("cpuacct", PathBuf::from("/a/w")),
        ],
    };
    let run = limits.for_run(8, 64, 500, 100);
    assert_eq!(run.cgroups[1].dir, PathBuf::from("/a/w/run-8"));
    assert!(run.cgroups[1].settings.is_empty());
}

#[test]
fn a_v2_run_gets_one_directory_with_the_enabled_controllers_limits() {
    let life = PathBuf::from("/u/megha-worker-1.0");
    let limits = Limits::Cgroup {
        v2: true,
        lives: vec![("memory", life.clone()), ("pids", life.clone())],
        pool: Pool::default(),
    };
    let run = limits.for_run(3, 64, 500, 100);
    assert_eq!(run.cgroups.len(), 1);
    assert_eq!(run.cgroups[0].dir, life.join("run-3"));
    assert_eq!(
        run.cgroups[0].settings,
        vec![
            ("memory.max".to_string(), (64u64 << 20).to_string()),
            ("pids.max".to_string(), "100".to_string())
        ]
    );
    assert!(
        limits.describe().contains("memory, pids limits"),
        "{}",
        limits.describe()
    );
}
