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
        // The same build as scripts/test.sh's `cargo build --workspace --bins`, so that
        // it is a no-op there. Two things made it a rebuild of TLS, HTTP, AMQP and every
        // service (381 s for the first test binary that asked, here): a narrower
        // selection (`-p ...`) unifies other features, and the variables cargo sets for
        // a running test (CARGO_PKG_NAME=tests, CARGO_MANIFEST_DIR...) differ from the
        // outer build's, and ring's build script reruns when they change
        // (`rerun-if-env-changed`), and with it everything above ring.
        cmd.current_dir(workspace_root())
            .args(["build", "--workspace", "--bins"]);
        for (name, _) in std::env::vars_os() {
            if name.to_str().is_some_and(set_for_a_running_crate) {
                cmd.env_remove(name);
            }
        }
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

/// Whether cargo sets the variable `name` for the crate it runs (a test, a build
/// script), as opposed to configuring cargo itself (CARGO_HOME, CARGO_TARGET_DIR,
/// CARGO_PROFILE_*, CARGO_BUILD_*...), which the inner build must keep.
fn set_for_a_running_crate(name: &str) -> bool {
    const PREFIXES: [&str; 4] = ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_BIN_", "CARGO_CFG_"];
    const NAMES: [&str; 6] = [
        "CARGO_CRATE_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
        "OUT_DIR",
        "CARGO_MAKEFLAGS",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p)) || NAMES.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::set_for_a_running_crate;

    #[test]
    fn only_what_cargo_sets_for_a_running_crate_is_removed() {
        for name in [
            "CARGO_PKG_NAME",
            "CARGO_MANIFEST_DIR",
            "CARGO_CRATE_NAME",
            "OUT_DIR",
        ] {
            assert!(set_for_a_running_crate(name), "{name}");
        }
        for name in [
            "CARGO",
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_INCREMENTAL",
            "PATH",
        ] {
            assert!(!set_for_a_running_crate(name), "{name}");
        }
    }
}
