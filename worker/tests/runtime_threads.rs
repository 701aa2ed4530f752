//! `--runtime-threads`: a service runs its requests, actors and timers on one
//! thread by default (no request pool), and on a pool of N threads when asked.
//! Checked on the worker binary (the GM and LM share `service_kit::runtime`), from
//! the names of its threads in /proc.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Starts a worker (its LM unreachable: it waits, serving), waits until it
/// listens, and returns how many of its threads carry each runtime name.
fn threads_of_worker(extra: &[&str]) -> (usize, usize) {
    let dir = std::env::temp_dir().join(format!(
        "megha-runtime-threads-{}-{}",
        std::process::id(),
        extra.len()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let mut child = Command::new(env!("CARGO_BIN_EXE_worker"))
        .args(["--lm-url", "http://127.0.0.1:1", "--listen", "127.0.0.1:0"])
        .args(["--cluster-name", "runtime-threads-test", "--data-dir"])
        .arg(&dir)
        .args(extra)
        .env_remove("MEGHA_RUNTIME_THREADS")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the worker binary starts");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if line.contains("worker listening") {
                let _ = tx.send(());
            }
        }
    });
    let listening = rx.recv_timeout(Duration::from_secs(30));
    let names: Vec<String> = std::fs::read_dir(format!("/proc/{}/task", child.id()))
        .map(|tasks| {
            tasks
                .flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .map(|c| c.trim().to_string())
                .collect()
        })
        .unwrap_or_default();
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        listening.is_ok(),
        "the worker did not say it listens within 30 s"
    );
    let count = |name: &str| names.iter().filter(|n| *n == name).count();
    (count(service_kit::runtime::POOL_THREAD_NAME), names.len())
}

#[test]
fn a_service_runs_on_one_thread_unless_given_more() {
    let (pool, all) = threads_of_worker(&[]);
    assert_eq!(pool, 0, "no request pool by default ({all} threads)");
    let (pool, _) = threads_of_worker(&["--runtime-threads", "3"]);
    // Its blocking pool, when used, carries the same name.
    assert!(
        pool >= 3,
        "--runtime-threads 3: three request threads, got {pool}"
    );
}
