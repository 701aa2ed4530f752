//! A newcomer's first walk (issue 38): `megha dev` starts a whole cluster in one
//! process (no RabbitMQ), then, with nothing but `megha` pointed at it: `run
//! --wait`, `run` + `wait` (the task's exit code), `logs`, `describe`, `resubmit
//! --wait`, `logs -f` of a task not started yet (it waits), `cancel` of an ended job
//! (it says so), a refused TOML job file (the error names its line), `status`; the
//! dashboard page is served on the same port; Ctrl-C
//! (SIGINT) stops it and it removes its temporary directory.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use tests::procs::{bin_dir, free_port, http};

/// `megha ARGS` against `url`, as a newcomer runs it (no token).
fn megha(url: &str, args: &[&str]) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(bin_dir().join("megha"))
        .args(args)
        .env("MEGHA_GM", url)
        .env_remove("MEGHA_TOKEN")
        .env_remove("MEGHA_TOKEN_FILE")
        .output()
        .expect("megha runs");
    (
        status.code().expect("megha exits"),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

struct Dev(Child);

impl Drop for Dev {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The job id in `submitted job ID (...)`.
fn submitted(out: &str) -> String {
    out.split_whitespace()
        .nth(2)
        .unwrap_or_else(|| panic!("no job id in {out}"))
        .to_owned()
}

#[test]
fn a_newcomer_runs_waits_reads_describes_and_resubmits_on_megha_dev() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let dev = Command::new(bin_dir().join("megha"))
        .args([
            "dev",
            "--",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--nodes",
            "2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("megha dev starts");
    let pid = dev.id();
    let mut dev = Dev(dev);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok((200, _, body)) = http("GET", &format!("{url}/healthz"), None) {
            if body.contains("\"ready\":true") {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "megha dev did not get ready at {url}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let (code, out, err) = megha(&url, &["run", "--wait", "--", "echo", "hello"]);
    assert_eq!(code, 0, "{out}{err}");
    let hello = submitted(&out);
    let (code, log, err) = megha(&url, &["logs", &hello, "0"]);
    assert_eq!((code, log.as_str()), (0, "hello\n"), "{err}");

    let (code, out, err) = megha(
        &url,
        &["run", "--", "sh", "-c", "echo about to fail; exit 3"],
    );
    assert_eq!(code, 0, "{err}");
    let failing = submitted(&out);
    let (code, out, err) = megha(&url, &["wait", &failing]);
    assert_eq!(code, 3, "wait exits with the task's code: {out}{err}");
    let (code, log, err) = megha(&url, &["logs", "-f", &failing, "0"]);
    assert_eq!((code, log.as_str()), (0, "about to fail\n"), "{err}");
    let (code, out, err) = megha(&url, &["describe", &failing]);
    assert_eq!(code, 0, "{err}");
    for part in [
        "echo about to fail; exit 3",
        "started (run 1)",
        "exited with code 3",
    ] {
        assert!(out.contains(part), "describe shows {part}: {out}");
    }
    let (code, out, err) = megha(&url, &["resubmit", "--wait", &failing]);
    assert_eq!(
        code, 3,
        "the resubmitted job fails the same way: {out}{err}"
    );
    // logs -f on a task that has not started waits for it (here: held until the
    // job it runs after ended); cancel of an ended job says so.
    let (code, out, err) = megha(&url, &["run", "--", "sleep", "2"]);
    assert_eq!(code, 0, "{err}");
    let first = submitted(&out);
    let (code, out, err) = megha(&url, &["run", "--after", &first, "--", "echo", "late"]);
    assert_eq!(code, 0, "{err}");
    let later = submitted(&out);
    let (code, log, err) = megha(&url, &["logs", "-f", &later, "0"]);
    assert_eq!((code, log.as_str()), (0, "late\n"), "{err}");
    assert!(err.contains("has not started; waiting"), "{err}");
    let (code, out, err) = megha(&url, &["cancel", &first]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("had already ended (finished)"), "{out}");

    // A TOML job file the GM refuses: the error names the file's line.
    let file = std::env::temp_dir().join(format!("megha-dev-walk-{pid}.toml"));
    std::fs::write(
        &file,
        "name = \"bad\"\n\n[[tasks]]\nresources = { cpu_millis = 0, memory_mb = 64 }\nexecutor = { type = \"exec\", command = [\"true\"] }\n",
    )
    .expect("job file");
    let (code, _, err) = megha(&url, &["run", file.to_str().expect("utf-8")]);
    let _ = std::fs::remove_file(&file);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("tasks[0].resources.cpu_millis") && err.contains(".toml:4)"),
        "the refusal points at line 4: {err}"
    );

    let (code, out, err) = megha(&url, &["status"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 6, "a header and five jobs: {out}");
    let (status, _, page) = http("GET", &format!("{url}/"), None).expect("the dashboard");
    assert!(status == 200 && page.contains("<html"), "{status}: {page}");

    // Ctrl-C: it stops and removes its temporary directory.
    let dir = std::env::temp_dir().join(format!("megha-dev-{pid}"));
    assert!(dir.is_dir(), "{} holds the task directories", dir.display());
    let _ = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(20);
    while dev.0.try_wait().expect("wait").is_none() {
        assert!(
            Instant::now() < deadline,
            "megha dev did not stop on SIGINT"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!dir.exists(), "{} was removed", dir.display());
}

/// The dev cluster has no tokens: asked to listen where others can reach it, it
/// refuses before starting anything, naming the flag, and nothing listens.
#[test]
fn megha_dev_refuses_a_non_loopback_address() {
    let port = free_port();
    let out = Command::new(bin_dir().join("megha"))
        .args(["dev", "--", "--listen", &format!("0.0.0.0:{port}")])
        .stdin(Stdio::null())
        .output()
        .expect("megha dev runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!("--listen 0.0.0.0:{port} is not loopback")),
        "{err}"
    );
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "nothing listens on {port}"
    );
}
