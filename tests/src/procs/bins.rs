//! The service binaries: built once per test binary, found next to the tests.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_path_buf()
}

/// Builds the workspace's binaries (once per test binary; a no-op after
/// scripts/test.sh's build) and returns the directory holding them.
pub fn bin_dir() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable path");
        let dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target/<profile>/deps/<test>")
            .to_path_buf();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        // The same selection as scripts/test.sh's `cargo build --workspace --bins`: a
        // narrower one (`-p ...`) unifies other features, so cargo rebuilds TLS, HTTP
        // and every service (six minutes on CI) for the first test binary that asks.
        cmd.current_dir(workspace_root())
            .args(["build", "--workspace", "--bins"]);
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        if let Some(target) = dir.parent() {
            cmd.env("CARGO_TARGET_DIR", target);
        }
        let status = cmd.status().expect("cargo build runs");
        assert!(
            status.success(),
            "cargo build of the service binaries failed"
        );
        dir
    })
    .clone()
}
