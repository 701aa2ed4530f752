//! Running `loadgen` (with the admin token), and a checked replay of the sample
//! trace.

use super::bins::{bin_dir, workspace_root};
use super::credentials::credentials;
use std::path::Path;
use std::process::{Command, ExitStatus};

/// Runs `loadgen` with `args` (a replay of the 183-task sample trace writing to
/// `out`; its log goes to `dir`) and checks the run: it succeeded, every task
/// finished exactly once, no node ran two tasks at once. Returns summary.json.
pub fn replay_sample_trace(args: &[String], out: &Path, dir: &Path) -> serde_json::Value {
    let status = loadgen(args, &dir.join("loadgen.log"));
    assert!(status.success(), "replay failed; logs in {}", dir.display());
    crate::checks::assert_sample_run(out);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).expect("summary"))
            .expect("json");
    assert_eq!(summary["finished"], 183);
    summary
}

/// Runs `loadgen` with `args` from the workspace root; returns its exit status.
pub fn loadgen(args: &[String], log: &Path) -> ExitStatus {
    let out = std::fs::File::create(log).expect("loadgen log");
    let err = out.try_clone().expect("log clone");
    Command::new(bin_dir().join("loadgen"))
        .env("MEGHA_TOKEN", &credentials().admin)
        .args(args)
        .current_dir(workspace_root())
        .stdout(out)
        .stderr(err)
        .status()
        .expect("loadgen runs")
}
