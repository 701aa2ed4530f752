//! Running the service binaries as child processes on loopback.
//!
//! Binaries: `CARGO_BIN_EXE_*` only exists for binaries of the test's own package, so
//! [`bin_dir`] runs `cargo build --bins` for the four packages once per test binary
//! (same profile and target directory as the tests: it is the directory two levels
//! above the running test executable) and returns that directory. Every service
//! listens on port 0 and prints `listening on http://ADDR`, which is how the tests
//! learn the ports. Children are killed when their [`Proc`] drops.
//!
//! Layout: [`bins`] (building and finding the binaries), [`credentials`](mod@credentials) (the test
//! clusters' secret and tokens), [`process`] ([`Proc`]), [`client`] (HTTP calls),
//! [`cluster`] ([`LoopbackCluster`]), [`replay`] (running `loadgen`), [`megha`]
//! (running the client), [`markers`] (a file exec tasks append to); every name is
//! re-exported here, so tests use `tests::procs::NAME`.

pub mod bins;
pub mod client;
pub mod cluster;
pub mod credentials;
pub mod fake_peer;
pub mod identity;
pub mod markers;
pub mod megha;
pub mod process;
pub mod reach;
pub mod replay;

pub use bins::{bin_dir, workspace_root};
pub use client::{get_json, http, http_bytes, http_raw, submit_tasks};
pub use cluster::{free_port, LoopbackCluster, RoleArgs};
pub use credentials::{credentials, random_hex, role_files, Credentials, RoleKeys};
pub use identity::{task_identity, task_identity_args, TASK_UIDS};
pub use markers::{MarkedCluster, Markers};
pub use megha::{job_of, megha_as, run_megha};
pub use process::Proc;
pub use replay::{loadgen, replay_sample_trace};

use std::time::{Duration, Instant};

/// Waits until `cond` holds (polling every 100 ms), or fails with `what`.
pub fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
