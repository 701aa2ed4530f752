//! Threads that wait for runs' commands, kept between runs: a thread made per run
//! maps a stack and unmaps it when done, and the unmapping interrupts every CPU
//! (a TLB shootdown), which costs more than the wait itself.

use super::run::{report, Run, Runs};
use crate::exec::wire::Report;
use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::sync::{Arc, Condvar, Mutex};

/// A started run to follow to its end.
pub(crate) struct Waited {
    pub run: u64,
    pub child: std::process::Child,
    pub r: Arc<Run>,
}

/// The waiter threads: as many as runs were ever followed at once.
pub(crate) struct Waiters {
    control: Option<OwnedFd>,
    runs: Arc<Runs>,
    /// Runs not yet taken by a waiter, and how many waiters are idle.
    queue: Mutex<(VecDeque<Waited>, usize)>,
    more: Condvar,
}

impl Waiters {
    pub fn new(control: &OwnedFd, runs: Arc<Runs>) -> Waiters {
        Waiters {
            control: control.try_clone().ok(),
            runs,
            queue: Mutex::new((VecDeque::new(), 0)),
            more: Condvar::new(),
        }
    }

    /// Hands `waited` to an idle waiter, or to a new one; without one, gives it back.
    pub fn follow(self: &Arc<Self>, waited: Waited) -> Result<(), (std::io::Error, Waited)> {
        let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        queue.0.push_back(waited);
        if queue.1 > queue.0.len() - 1 {
            self.more.notify_one();
            return Ok(());
        }
        let me = self.clone();
        let made = std::thread::Builder::new()
            .name("waiter".into())
            .stack_size(128 * 1024)
            .spawn(move || me.work());
        match made {
            Ok(_) => Ok(()),
            Err(e) => match queue.0.pop_back() {
                Some(back) => Err((e, back)),
                // Taken meanwhile by a waiter after all.
                None => Ok(()),
            },
        }
    }

    fn work(&self) {
        loop {
            let next = {
                let mut queue = self.queue.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    if let Some(w) = queue.0.pop_front() {
                        break w;
                    }
                    queue.1 += 1;
                    queue = self.more.wait(queue).unwrap_or_else(|e| e.into_inner());
                    queue.1 -= 1;
                }
            };
            self.end(next);
        }
    }

    /// Waits for the command, kills whatever it left behind, then reports the end.
    fn end(&self, mut waited: Waited) {
        let status = waited.child.wait();
        waited.r.kill_all(rustix::process::Signal::KILL);
        self.runs.lock().remove(&waited.run);
        let end = match status {
            Ok(s) => match (s.code(), s.signal()) {
                (Some(code), _) => Report::Exit { code },
                (None, Some(signal)) => Report::Signal { signal },
                (None, None) => Report::Exit { code: -1 },
            },
            Err(e) => Report::Error {
                reason: format!("cannot wait for the command: {e}"),
            },
        };
        if let Some(control) = &self.control {
            report(control, waited.run, end);
        }
    }
}
