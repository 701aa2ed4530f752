//! A RabbitMQ node of a test's own that speaks only `amqps://` ([`start_tls_rabbitmq`]).
//!
//! The node runs beside the machine's broker (which stays on 5672): its own node name,
//! TLS and distribution ports, database, logs, Erlang cookie (`HOME`), configuration
//! and no plugins. Its only listener is TLS (`listeners.tcp = none`), with a
//! certificate of a private CA made for it ([`crate::pki`]), and its only user is a
//! dedicated one with a random password (no guest). It is stopped, and its directory
//! removed, when the [`TlsBroker`] drops.
//!
//! Needs the RabbitMQ server scripts (Debian: `/usr/lib/rabbitmq/bin`, from package
//! rabbitmq-server; elsewhere set `MEGHA_RABBITMQ_BIN` to the directory holding
//! `rabbitmq-server` and `rabbitmqctl`). A node that cannot start fails the test with
//! what is missing and the node's log; it is never skipped.

use crate::pki::{make_pki, Pki};
use crate::procs::free_port;
use std::io::Read;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a node may take to boot before the test fails.
const BOOT_TIMEOUT: Duration = Duration::from_secs(60);

/// A running TLS-only RabbitMQ node.
#[derive(Debug)]
pub struct TlsBroker {
    /// `amqps://USER:PASSWORD@127.0.0.1:PORT/%2f`.
    pub url: String,
    /// The CA that signed the node's certificate (give it to `--tls-ca-file`).
    pub pki: Pki,
    /// The node's Erlang name (`megha-tls-...@localhost`).
    pub node: String,
    dir: PathBuf,
    bin: PathBuf,
    child: Child,
}

fn rabbitmq_bin() -> PathBuf {
    let dir = std::env::var_os("MEGHA_RABBITMQ_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/lib/rabbitmq/bin"));
    if !dir.join("rabbitmq-server").is_file() {
        panic!(
            "cannot start a TLS RabbitMQ node: no {}; install rabbitmq-server (Debian: apt-get install rabbitmq-server) or set MEGHA_RABBITMQ_BIN to the directory holding rabbitmq-server and rabbitmqctl",
            dir.join("rabbitmq-server").display()
        );
    }
    dir
}

fn tail(path: &Path, bytes: usize) -> String {
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_string(&mut text);
    }
    let start = text.len().saturating_sub(bytes);
    let start = (start..text.len())
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(text.len());
    text[start..].to_owned()
}

/// Starts a TLS-only RabbitMQ node (see the module doc) and waits until it accepts
/// connections on its TLS port; panics with the node's log if it does not within a
/// minute.
pub fn start_tls_rabbitmq() -> TlsBroker {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let bin = rabbitmq_bin();
    let name = format!(
        "megha-tls-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    );
    let dir = std::env::temp_dir().join(&name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("broker dir");
    let pki = make_pki(&dir.join("pki"), "megha test broker CA");
    let tls_port = free_port();
    let dist_port = free_port();
    let user = "megha-tls";
    let password = crate::procs::random_hex(16);
    let path = |p: &Path| p.to_str().expect("utf-8 temp path").to_owned();
    let config = format!(
        "listeners.tcp = none\n\
         listeners.ssl.default = 127.0.0.1:{tls_port}\n\
         ssl_options.cacertfile = {}\n\
         ssl_options.certfile = {}\n\
         ssl_options.keyfile = {}\n\
         ssl_options.verify = verify_none\n\
         ssl_options.fail_if_no_peer_cert = false\n\
         default_user = {user}\n\
         default_pass = {password}\n\
         default_vhost = /\n\
         default_permissions.configure = .*\n\
         default_permissions.read = .*\n\
         default_permissions.write = .*\n",
        path(&pki.ca),
        path(&pki.cert),
        path(&pki.key),
    );
    std::fs::write(dir.join("rabbitmq.conf"), config).expect("rabbitmq.conf");
    std::fs::write(dir.join("enabled_plugins"), "[].\n").expect("enabled_plugins");
    std::fs::write(dir.join("rabbitmq-env.conf"), "").expect("rabbitmq-env.conf");
    let node = format!("{name}@localhost");
    let log_path = dir.join("node.log");
    let log = std::fs::File::create(&log_path).expect("node log");
    let err = log.try_clone().expect("node log");
    let child = node_env(Command::new(bin.join("rabbitmq-server")), &dir, &node)
        .env("RABBITMQ_DIST_PORT", dist_port.to_string())
        .env("RABBITMQ_CONFIG_FILE", dir.join("rabbitmq.conf"))
        .env("RABBITMQ_ADVANCED_CONFIG_FILE", dir.join("advanced.config"))
        .env("RABBITMQ_ENABLED_PLUGINS_FILE", dir.join("enabled_plugins"))
        .env("RABBITMQ_MNESIA_BASE", dir.join("mnesia"))
        .env("RABBITMQ_LOG_BASE", dir.join("log"))
        .env("RABBITMQ_PID_FILE", dir.join("node.pid"))
        .env("RABBITMQ_LOGS", "-")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        // Its own process group: the script and the Erlang VM it starts stop together.
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.join("rabbitmq-server").display()));
    let mut broker = TlsBroker {
        url: format!("amqps://{user}:{password}@127.0.0.1:{tls_port}/%2f"),
        pki,
        node,
        dir,
        bin,
        child,
    };
    let deadline = Instant::now() + BOOT_TIMEOUT;
    loop {
        let booted = tail(&log_path, 1 << 20).contains("Server startup complete");
        if booted && std::net::TcpStream::connect(("127.0.0.1", tls_port)).is_ok() {
            return broker;
        }
        if let Ok(Some(status)) = broker.child.try_wait() {
            panic!(
                "the TLS RabbitMQ node {} exited ({status}) before it listened on 127.0.0.1:{tls_port}; its log ends:\n{}",
                broker.node,
                tail(&log_path, 4000)
            );
        }
        if Instant::now() > deadline {
            panic!(
                "the TLS RabbitMQ node {} did not listen on 127.0.0.1:{tls_port} within {BOOT_TIMEOUT:?}; its log ends:\n{}",
                broker.node,
                tail(&log_path, 4000)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The environment every command for the node needs: its name, and a home (Erlang
/// cookie) and env file of its own rather than the machine broker's.
fn node_env(mut cmd: Command, dir: &Path, node: &str) -> Command {
    cmd.env("HOME", dir)
        .env("RABBITMQ_NODENAME", node)
        .env("RABBITMQ_CONF_ENV_FILE", dir.join("rabbitmq-env.conf"));
    cmd
}

impl TlsBroker {
    /// The node's client connections as (user, over TLS) pairs (`rabbitmqctl
    /// list_connections user ssl`).
    pub fn connections(&self) -> Vec<(String, bool)> {
        let out = node_env(
            Command::new(self.bin.join("rabbitmqctl")),
            &self.dir,
            &self.node,
        )
        .args(["-q", "-n", &self.node, "list_connections", "user", "ssl"])
        .output()
        .expect("run rabbitmqctl");
        assert!(
            out.status.success(),
            "rabbitmqctl list_connections on {}: {}",
            self.node,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let mut cols = l.split('\t');
                let user = cols.next()?.trim().to_owned();
                let ssl = cols.next()?.trim();
                (user != "user").then(|| (user, ssl == "true"))
            })
            .collect()
    }
}

impl Drop for TlsBroker {
    fn drop(&mut self) {
        // The whole process group: the script and its Erlang VM.
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
        let _ = self.child.wait();
        let deadline = Instant::now() + Duration::from_secs(10);
        let alive = || {
            Command::new("kill")
                .args(["-0", "--", &group])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        while alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
