//! A marker file that exec tasks append to, whatever uid they run as: how the
//! containment tests see which runs of a task were alive when.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

/// `DIR/shared/markers`: a 0666 file in a 1777 directory (every task uid may
/// append, none may replace it).
#[derive(Debug)]
pub struct Markers {
    pub path: PathBuf,
}

impl Markers {
    /// Makes `dir/shared/markers`, empty.
    pub fn create(dir: &Path) -> Markers {
        let shared = dir.join("shared");
        std::fs::create_dir_all(&shared).expect("shared dir");
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777))
            .expect("chmod shared dir");
        let path = shared.join("markers");
        std::fs::write(&path, "").expect("markers");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))
            .expect("chmod markers");
        Markers { path }
    }

    /// The JSON of an exec task (one core, 64 MiB) that appends `start LABEL`, then
    /// `tick LABEL` every 100 ms `ticks` times, then `end LABEL`. `label` is shell
    /// words (e.g. `$MEGHA_TASK`); `tag` ends the command line, to find its
    /// processes in /proc.
    pub fn task_json(&self, label: &str, ticks: u32, tag: &str) -> String {
        let script = format!(
            "m={m}; r=\"{label}\"; echo start $r >> $m; i=0; while [ $i -lt {ticks} ]; do echo tick $r >> $m; sleep 0.1; i=$((i+1)); done; echo end $r >> $m # {tag}",
            m = self.path.display()
        );
        format!(
            r#"{{"resources":{{"cpu_millis":1000,"memory_mb":64}},"executor":{{"type":"exec","command":["sh","-c",{}]}}}}"#,
            serde_json::to_string(&script).expect("json")
        )
    }

    /// The lines written so far.
    pub fn read(&self) -> String {
        std::fs::read_to_string(&self.path).expect("markers")
    }

    /// How many runs have written their `start` line.
    pub fn starts(&self) -> usize {
        self.read()
            .lines()
            .filter(|l| l.starts_with("start "))
            .count()
    }
}

/// The containment tests' cluster: 1 GM (3 attempts per task), 1 LM of 8 one-core
/// nodes (a worker silent for 2 s is lost), `workers` workers checking in every
/// 200 ms (nodes alternate between them), and a marker file; everything under
/// `$TMPDIR/megha-NAME-<pid>`.
#[derive(Debug)]
pub struct MarkedCluster {
    /// Kept for the test's life (its vhost).
    pub broker: crate::broker::TestBroker,
    pub cluster: super::LoopbackCluster,
    pub markers: Markers,
    /// The test's directory (logs, marker file), and the processes' logs in it.
    pub dir: PathBuf,
    pub logs: PathBuf,
}

impl MarkedCluster {
    pub fn start(name: &str, workers: u32) -> MarkedCluster {
        let broker = crate::broker::require_rabbitmq();
        let dir = std::env::temp_dir().join(format!("megha-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let logs = dir.join("logs");
        let markers = Markers::create(&dir);
        let flags = |list: &[&str]| list.iter().map(|a| a.to_string()).collect();
        let extra = super::RoleArgs {
            gm: flags(&["--max-attempts", "3"]),
            lm: flags(&["--worker-timeout-ms", "2000"]),
            worker: flags(&["--lm-check-ms", "200"]),
            ..super::RoleArgs::default()
        };
        let cluster = super::LoopbackCluster::start_with_args(
            1,
            1,
            8,
            workers,
            &broker.url,
            &logs,
            &[],
            &extra,
        );
        MarkedCluster {
            broker,
            cluster,
            markers,
            dir,
            logs,
        }
    }
}
