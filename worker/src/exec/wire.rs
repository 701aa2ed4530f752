//! What the worker and its task supervisor (`megha-task-exec`, [`super::helper`])
//! say to each other: one JSON message per `SOCK_SEQPACKET` record (record
//! boundaries kept, so a message and the descriptors sent with it arrive together).
//!
//! - worker -> supervisor: [`Order`]s: start a run (with its stdout and stderr log
//!   files as descriptors), SIGTERM or SIGKILL every process of a run, and the
//!   worker's lease (until when its LM counts it alive: a supervisor whose worker
//!   froze kills every run itself when the lease runs out, [`super::helper`]);
//! - supervisor -> worker: [`Event`]s: a run started (its pid), ended (exit code or
//!   signal, after every process of the run was killed), or could not start (why).
//!
//! When the worker's end closes (the worker died), the supervisor kills every run
//! and exits; when the supervisor's end closes, the worker kills what is left in
//! the runs' cgroups and reports them failed.

use serde::{Deserialize, Serialize};
use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;

/// Largest message (a run's spec: the API allows 128 KiB of command, environment
/// and cwd, at most ~6x that as escaped JSON).
pub const MAX_MESSAGE: usize = 1 << 20;

/// What the supervisor runs for one run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Spec {
    pub program: String,
    pub args: Vec<String>,
    /// The command's whole environment.
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// `None`: run as the supervisor's own user (the worker's; `--allow-run-as-self`).
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// The run's cgroup in each hierarchy (created by the supervisor when missing).
    pub cgroups: Vec<CgroupSpec>,
    /// cgroup v2: the command joins its cgroup itself, before its first
    /// instruction (one directory); v1: the supervisor's spawning thread joins the
    /// run's cgroups and the command is forked inside them.
    pub cgroup_v2: bool,
    /// `RLIMIT_AS` in bytes (without cgroups).
    pub address_space: Option<u64>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct CgroupSpec {
    pub dir: PathBuf,
    /// Written before the command is spawned.
    pub settings: Vec<(String, String)>,
    /// Written right after the spawn (the CPU quota: the spawning thread, inside the
    /// run's cgroups for the spawn, must not be throttled by it).
    #[serde(default)]
    pub after_spawn: Vec<(String, String)>,
}

/// Worker -> supervisor.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// Start `run`; sent with two descriptors: its stdout and stderr.
    Start { run: u64, spec: Spec },
    /// SIGTERM to every process of the run.
    Term { run: u64 },
    /// SIGKILL to every process of the run.
    Kill { run: u64 },
    /// The worker's lease: at `kill_at_ns` (`CLOCK_MONOTONIC`, nanoseconds; one
    /// clock for every process of the host) without a newer lease, the supervisor
    /// kills every run and starts none until a lease in the future comes. `None`:
    /// no lease (the LM gives none), never act on time.
    Lease { kill_at_ns: Option<u64> },
}

/// `CLOCK_MONOTONIC` now, in nanoseconds (the clock of [`Order::Lease`]).
pub fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec as u64).saturating_mul(1_000_000_000) + t.tv_nsec as u64
}

/// Supervisor -> worker: what became of `run`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Event {
    pub run: u64,
    pub report: Report,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Report {
    /// The command runs (inside its cgroups, as its user).
    Started { pid: u32 },
    /// The command exited; nothing of the run is left.
    Exit { code: i32 },
    /// The command was killed by a signal; nothing of the run is left.
    Signal { signal: i32 },
    /// The run could not start (nothing of it is left).
    Error { reason: String },
}

impl Report {
    /// The run's last word (nothing follows for its run).
    pub fn is_final(&self) -> bool {
        !matches!(self, Report::Started { .. })
    }
}

/// Why a message was not sent.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The message itself cannot go (too large): sending it again will not help.
    #[error("{0}")]
    Message(String),
    /// The other end is gone (or the socket failed).
    #[error("{0}")]
    Socket(String),
}

/// Sends `message` (with at most two descriptors `fds`) as one record.
pub fn send<T: Serialize>(
    socket: impl AsFd,
    message: &T,
    fds: &[std::os::fd::BorrowedFd<'_>],
) -> Result<(), SendError> {
    use rustix::net::{sendmsg, SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    let bytes = serde_json::to_vec(message)
        .map_err(|e| SendError::Message(format!("cannot encode: {e}")))?;
    if bytes.len() > MAX_MESSAGE {
        return Err(SendError::Message(format!(
            "the run's command, arguments and environment take {} bytes encoded, more than {MAX_MESSAGE}",
            bytes.len()
        )));
    }
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(SendError::Message(
            "too many descriptors for one message".into(),
        ));
    }
    loop {
        match sendmsg(
            &socket,
            &[IoSlice::new(&bytes)],
            &mut control,
            SendFlags::NOSIGNAL,
        ) {
            Ok(_) => return Ok(()),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(SendError::Socket(format!("cannot send: {e}"))),
        }
    }
}

/// Receives one record: `Ok(None)` when the other end closed. Received descriptors
/// are close-on-exec (no command inherits another run's files).
pub fn recv<T: for<'de> Deserialize<'de>>(
    socket: impl AsFd,
    buffer: &mut [u8],
) -> Result<Option<(T, Vec<OwnedFd>)>, String> {
    use rustix::net::{recvmsg, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = loop {
        match recvmsg(
            &socket,
            &mut [IoSliceMut::new(buffer)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Ok(got) => break got,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(format!("cannot receive: {e}")),
        }
    };
    let mut fds = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = message {
            fds.extend(received);
        }
    }
    if got.bytes == 0 {
        return Ok(None);
    }
    if got.flags.contains(rustix::net::ReturnFlags::TRUNC) {
        return Err(format!("a message longer than {} bytes", buffer.len()));
    }
    let message = serde_json::from_slice(&buffer[..got.bytes])
        .map_err(|e| format!("a message that does not parse: {e}"))?;
    Ok(Some((message, fds)))
}

/// A connected pair of `SOCK_SEQPACKET` sockets (close-on-exec) whose send buffers
/// hold a [`MAX_MESSAGE`].
pub fn pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    use rustix::net::{socketpair, sockopt, AddressFamily, SocketFlags, SocketType};
    let (a, b) = socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?;
    for s in [&a, &b] {
        // Best effort: the kernel caps it at net.core.wmem_max (then doubles it).
        let _ = sockopt::set_socket_send_buffer_size(s, 2 * MAX_MESSAGE);
    }
    Ok((a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_and_descriptors_cross_as_one_record() {
        let (a, b) = pair().expect("pair");
        let file = std::fs::File::open("/dev/null").expect("null");
        let order = Order::Kill { run: 7 };
        send(&a, &order, &[file.as_fd(), file.as_fd()]).expect("send");
        send(&a, &Order::Term { run: 8 }, &[]).expect("send");
        let mut buf = vec![0u8; MAX_MESSAGE];
        let (got, fds): (Order, _) = recv(&b, &mut buf).expect("recv").expect("open");
        assert_eq!(got, order);
        assert_eq!(fds.len(), 2);
        let (got, fds): (Order, _) = recv(&b, &mut buf).expect("recv").expect("open");
        assert_eq!(got, Order::Term { run: 8 });
        assert!(fds.is_empty());
        drop(a);
        assert!(recv::<Order>(&b, &mut buf).expect("recv").is_none());
    }

    #[test]
    fn a_message_too_large_is_refused_with_its_size() {
        let (a, _b) = pair().expect("pair");
        let spec = Spec {
            program: "x".repeat(MAX_MESSAGE),
            args: vec![],
            env: vec![],
            cwd: "/".into(),
            uid: None,
            gid: None,
            cgroups: vec![],
            cgroup_v2: false,
            address_space: None,
        };
        let err = send(&a, &Order::Start { run: 1, spec }, &[]).expect_err("too large");
        assert!(matches!(err, SendError::Message(_)), "{err}");
        assert!(err.to_string().contains("more than"), "{err}");
    }
}
