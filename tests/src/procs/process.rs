//! A running service process ([`Proc`]): started with the test credentials, its
//! URL read from its `listening on` line, killed when dropped.

use super::bins::{bin_dir, workspace_root};
use super::credentials::credentials;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// A running service process.
#[derive(Debug)]
pub struct Proc {
    pub name: String,
    pub url: String,
    child: Child,
}

impl Proc {
    /// Starts `bin` with `args`, stderr to `log_dir/name.log`, and waits for its
    /// `listening on` line.
    pub fn spawn(bin: &str, args: &[String], log_dir: &Path, name: &str) -> Proc {
        let c = credentials();
        let env = [
            ("MEGHA_CLUSTER_SECRET_FILE", Some(c.secret_file.as_os_str())),
            ("MEGHA_TOKENS_FILE", Some(c.tokens_file.as_os_str())),
        ];
        Self::spawn_env(bin, args, log_dir, name, &env)
    }

    /// [`Proc::spawn`] with these environment variables instead of the test
    /// credentials (`None` removes one).
    pub fn spawn_env(
        bin: &str,
        args: &[String],
        log_dir: &Path,
        name: &str,
        env: &[(&str, Option<&std::ffi::OsStr>)],
    ) -> Proc {
        std::fs::create_dir_all(log_dir).expect("log dir");
        let log = std::fs::File::create(log_dir.join(format!("{name}.log"))).expect("log file");
        let mut cmd = Command::new(bin_dir().join(bin));
        for (k, v) in env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        let mut child = cmd
            .args(args)
            .current_dir(workspace_root())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            for line in lines.by_ref().map_while(Result::ok) {
                if let Some(url) = line.strip_prefix("listening on ") {
                    let _ = tx.send(url.to_owned());
                    break;
                }
            }
            for _ in lines {}
        });
        let url = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| {
                panic!(
                    "{name} did not start; see {}",
                    log_dir.join(format!("{name}.log")).display()
                )
            });
        Proc {
            name: name.to_owned(),
            url,
            child,
        }
    }

    /// The process id (to send it a signal).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits up to `timeout` for the process to exit on its own.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// SIGTERM, then wait (up to `timeout`, then SIGKILL).
    pub fn terminate(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        None
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
