//! Running the `megha` client as a process, as a user would.

use super::bins::bin_dir;
use serde_json::Value;
use std::process::{Command, Output};

/// `megha ARGS` against `gm` with `token`, `$USER` set to a login that is nobody's
/// token user.
pub fn megha_as(gm: &str, token: &str, args: &[&str]) -> Command {
    let mut c = Command::new(bin_dir().join("megha"));
    c.args(args)
        .env("MEGHA_GM", gm)
        .env("MEGHA_TOKEN", token)
        .env_remove("MEGHA_TOKEN_FILE")
        .env("USER", "login-not-a-token-user");
    c
}

/// Runs it: (exit code, stdout, stderr).
pub fn run_megha(mut c: Command) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = c.output().expect("megha runs");
    (
        status.code().expect("megha exits (no signal)"),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

/// The job id of `megha --json run ...`'s answer (the first JSON value printed).
pub fn job_of(out: &str) -> u64 {
    let first: Value = serde_json::Deserializer::from_str(out)
        .into_iter()
        .next()
        .and_then(Result::ok)
        .unwrap_or_else(|| panic!("no JSON in {out}"));
    first["job"]
        .as_u64()
        .unwrap_or_else(|| panic!("no job: {out}"))
}
