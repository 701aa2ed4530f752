//! The worker's side of its task supervisor (`megha-task-exec`, [`super::helper`]):
//! one process per worker, started at the first exec run and again after it
//! ended (each end while the worker runs is logged and counted). Runs are started
//! and stopped with [`Order`]s; each run's [`Report`]s come back on its own
//! [`RunChannel`]. When the supervisor ends, every run's channel ends too (the
//! worker then kills what is left in the run's cgroups and reports it failed);
//! when the worker ends (or [`Supervisor::stop`]), the supervisor kills every run.

use super::wire::{self, Event, Order, Report, SendError, Spec};
use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// The worker's task supervisor.
#[derive(Debug)]
pub struct Supervisor {
    program: PathBuf,
    current: Mutex<Option<Arc<Live>>>,
    /// Supervisors that ended while the worker ran.
    lost: Arc<AtomicU64>,
    stopped: Arc<AtomicBool>,
    /// The worker's lease as last told ([`Order::Lease`]): sent to each new
    /// supervisor process before its first run.
    lease: Mutex<Option<u64>>,
}

/// One supervisor process.
#[derive(Debug)]
struct Live {
    control: OwnedFd,
    /// The running runs' report channels.
    runs: Mutex<HashMap<u64, mpsc::UnboundedSender<Report>>>,
    gone: AtomicBool,
}

/// One run's reports, and its orders.
#[derive(Debug)]
pub struct RunChannel {
    run: u64,
    live: Arc<Live>,
    reports: mpsc::UnboundedReceiver<Report>,
}

impl RunChannel {
    /// The run's next report; `None` when the supervisor ended first.
    pub async fn next(&mut self) -> Option<Report> {
        self.reports.recv().await
    }

    /// SIGTERM to every process of the run.
    pub fn term(&self) {
        self.order(Order::Term { run: self.run });
    }

    /// SIGKILL to every process of the run.
    pub fn kill(&self) {
        self.order(Order::Kill { run: self.run });
    }

    fn order(&self, order: Order) {
        // A supervisor gone has killed the run already (and the channel ends).
        let _ = wire::send(&self.live.control, &order, &[]);
    }
}

impl Drop for RunChannel {
    fn drop(&mut self) {
        lock(&self.live.runs).remove(&self.run);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Supervisor {
    /// A supervisor running `program` (started at the first run).
    pub fn new(program: PathBuf) -> Supervisor {
        Supervisor {
            program,
            current: Mutex::new(None),
            lost: Arc::new(AtomicU64::new(0)),
            stopped: Arc::new(AtomicBool::new(false)),
            lease: Mutex::new(None),
        }
    }

    /// The worker's lease: without a newer one, at `kill_at` the supervisor kills
    /// every run and starts none (a frozen worker cannot fence itself); `None`: no
    /// lease. Told to the running supervisor at once, and to the next one first.
    pub fn lease(&self, kill_at: Option<std::time::Instant>) {
        let kill_at_ns = kill_at.map(|at| {
            let left = at.saturating_duration_since(std::time::Instant::now());
            wire::monotonic_ns().saturating_add(u64::try_from(left.as_nanos()).unwrap_or(u64::MAX))
        });
        *lock(&self.lease) = kill_at_ns;
        let current = lock(&self.current);
        if let Some(live) = current.as_ref().filter(|l| !l.gone.load(Ordering::Relaxed)) {
            // A supervisor gone has killed its runs already.
            let _ = wire::send(&live.control, &Order::Lease { kill_at_ns }, &[]);
        }
    }

    /// How many times the supervisor ended while the worker ran.
    pub fn lost(&self) -> u64 {
        self.lost.load(Ordering::Relaxed)
    }

    /// Starts `run` with `spec`, its stdout and stderr going to the given files.
    pub fn start(
        &self,
        run: u64,
        spec: Spec,
        stdout: &std::fs::File,
        stderr: &std::fs::File,
    ) -> Result<RunChannel, String> {
        let order = Order::Start { run, spec };
        let mut last = String::new();
        // A supervisor that ended since the last run is found dead here: one more
        // try with a new one.
        for _ in 0..2 {
            let live = self.live()?;
            let (tx, reports) = mpsc::unbounded_channel();
            lock(&live.runs).insert(run, tx);
            let channel = RunChannel {
                run,
                live: live.clone(),
                reports,
            };
            match wire::send(&live.control, &order, &[stdout.as_fd(), stderr.as_fd()]) {
                Ok(()) => return Ok(channel),
                Err(SendError::Message(why)) => return Err(why),
                Err(SendError::Socket(why)) => {
                    live.gone.store(true, Ordering::Relaxed);
                    last = why;
                }
            }
        }
        Err(format!(
            "cannot hand the run to the task supervisor: {last}"
        ))
    }

    /// Stops the supervisor: it kills every run still running and exits.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        if let Some(live) = lock(&self.current).take() {
            let _ = rustix::net::shutdown(&live.control, rustix::net::Shutdown::Both);
        }
    }

    /// The running supervisor, started when there is none.
    fn live(&self) -> Result<Arc<Live>, String> {
        let mut current = lock(&self.current);
        if let Some(live) = current.as_ref().filter(|l| !l.gone.load(Ordering::Relaxed)) {
            return Ok(live.clone());
        }
        if self.stopped.load(Ordering::Relaxed) {
            return Err("the worker is stopping".into());
        }
        let live = spawn(&self.program, self.lost.clone(), self.stopped.clone())?;
        let kill_at_ns = *lock(&self.lease);
        if kill_at_ns.is_some() {
            let order = Order::Lease { kill_at_ns };
            if let Err(e) = wire::send(&live.control, &order, &[]) {
                tracing::warn!(error = %e, "cannot tell the new task supervisor the worker's lease");
            }
        }
        *current = Some(live.clone());
        Ok(live)
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts a supervisor process and the thread that hands its reports to runs.
fn spawn(
    program: &Path,
    lost: Arc<AtomicU64>,
    stopped: Arc<AtomicBool>,
) -> Result<Arc<Live>, String> {
    let (ours, theirs) = wire::pair().map_err(|e| format!("cannot make a socket pair: {e}"))?;
    let mut child = std::process::Command::new(program)
        .env_clear()
        .stdin(Stdio::from(theirs))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        // Its own group: a Ctrl-C meant for the worker does not reach it (it acts
        // when the worker goes away).
        .process_group(0)
        .spawn()
        .map_err(|e| {
            format!(
                "cannot run the task supervisor {}: {e} (install megha-task-exec next to the worker, or give --task-exec-helper)",
                program.display()
            )
        })?;
    let reader = ours
        .try_clone()
        .map_err(|e| format!("cannot clone the supervisor's socket: {e}"))?;
    let live = Arc::new(Live {
        control: ours,
        runs: Mutex::new(HashMap::new()),
        gone: AtomicBool::new(false),
    });
    let pid = child.id();
    tracing::info!(pid, program = %program.display(), "task supervisor started");
    let shared = live.clone();
    std::thread::Builder::new()
        .name("task-supervisor".into())
        .spawn(move || {
            let mut buffer = vec![0u8; 64 * 1024];
            let why = loop {
                match wire::recv::<Event>(&reader, &mut buffer) {
                    Ok(Some((event, _))) => {
                        let mut runs = lock(&shared.runs);
                        let last = event.report.is_final();
                        if let Some(tx) = runs.get(&event.run) {
                            let _ = tx.send(event.report);
                        }
                        if last {
                            runs.remove(&event.run);
                        }
                    }
                    Ok(None) => break "its socket closed".to_string(),
                    Err(e) => break e,
                }
            };
            shared.gone.store(true, Ordering::Relaxed);
            let mut runs = lock(&shared.runs);
            let orphaned = runs.len();
            // Stopped by the worker with nothing running is no loss. Counted
            // before the runs hear of it (their channels close below).
            let loss = orphaned > 0 || !stopped.load(Ordering::Relaxed);
            if loss {
                lost.fetch_add(1, Ordering::Relaxed);
            }
            runs.clear();
            drop(runs);
            let status = child.wait();
            if loss {
                tracing::warn!(pid, runs = orphaned, status = ?status, reason = %why, "the task supervisor ended; its runs are reported failed and what is left of them killed; a new one starts with the next run");
            } else {
                tracing::info!(pid, status = ?status, "task supervisor stopped");
            }
        })
        .map_err(|e| format!("cannot start the supervisor's reader thread: {e}"))?;
    Ok(live)
}
