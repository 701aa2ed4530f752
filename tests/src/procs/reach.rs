//! What an exec task can reach (issue 31): a probe script a test submits as a
//! task, and the check of what the task printed.

/// A shell script printing the task's uid, the names of its environment
/// variables (one line), then `READ path` or `DENIED path` for each of `targets`
/// (a path ending in `/` is listed, any other read), then `done`.
pub fn probe_script(targets: &[String]) -> String {
    let probes: String = targets
        .iter()
        .map(|t| {
            let how = if t.ends_with('/') { "ls" } else { "cat" };
            format!("if {how} {t} >/dev/null 2>&1; then echo READ {t}; else echo DENIED {t}; fi; ")
        })
        .collect();
    format!("id -u; env | cut -d= -f1 | sort | tr '\\n' ' '; echo; {probes}echo done")
}

/// Checks what [`probe_script`] printed for `targets`: every target denied, no
/// variable but the task's own and the shell's; returns the task's uid.
pub fn check_probe(got: &str, targets: &[String]) -> u32 {
    let mut lines = got.lines();
    let uid: u32 = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or_else(|| panic!("no uid in {got:?}"));
    let env = lines.next().unwrap_or_default();
    let shell = ["PWD", "SHLVL", "OLDPWD", "_"];
    // Set by the GM in the task's own spec (`env`) at admission (docs/cli.md).
    let from_spec = [global_master::service::admission::executor_api::TASK_COUNT_VARIABLE];
    for var in env.split_whitespace() {
        assert!(
            worker::exec::process::TASK_VARIABLES.contains(&var)
                || shell.contains(&var)
                || from_spec.contains(&var),
            "the task saw a variable that is not its own: {var} (all: {env})"
        );
    }
    assert!(!got.contains("READ "), "the task reached: {got}");
    for t in targets {
        assert!(
            got.contains(&format!("DENIED {t}\n")),
            "no answer for {t}: {got}"
        );
    }
    assert!(got.contains("done"), "the probe did not finish: {got}");
    uid
}
