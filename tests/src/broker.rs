//! The RabbitMQ precondition of the multi-process tests: never skipped silently. Each
//! test gets a virtual host of its own ([`TestBroker`]), so that two test clusters on
//! one machine (parallel tests, two checkouts) never see each other's messages.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// The broker's default virtual host (for probing; tests use their own).
pub const AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// A virtual host made for one test, deleted when dropped.
#[derive(Debug)]
pub struct TestBroker {
    /// The URL of the test's own virtual host.
    pub url: String,
    vhost: String,
    /// Broker users made by [`TestBroker::user`], deleted when dropped.
    users: std::sync::Mutex<Vec<String>>,
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        let _ = rabbitmqctl(&["delete_vhost", &self.vhost]);
        let users = self.users.lock().unwrap_or_else(|p| p.into_inner());
        for user in users.iter() {
            let _ = rabbitmqctl(&["delete_user", user]);
        }
    }
}

impl TestBroker {
    /// Makes broker user `name` (deleted with the test's virtual host), allowed
    /// everything on that virtual host, and returns the URL logging in as it.
    pub fn user(&self, name: &str) -> String {
        let password = crate::procs::random_hex(12);
        let made = rabbitmqctl(&["add_user", name, &password]).and_then(|()| {
            rabbitmqctl(&["set_permissions", "-p", &self.vhost, name, ".*", ".*", ".*"])
        });
        if let Err(e) = made {
            panic!("cannot make broker user {name}: {e}");
        }
        self.users
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(name.to_owned());
        format!("amqp://{name}:{password}@127.0.0.1:5672/{}", self.vhost)
    }
}

impl TestBroker {
    /// This test's virtual host.
    pub fn vhost(&self) -> &str {
        &self.vhost
    }

    /// Makes the users of a RabbitMQ definitions file (`rabbitmqctl
    /// import_definitions`, as the broker's `load_definitions` reads it at boot; with
    /// their permissions and hashed passwords), deleted with the test's virtual host;
    /// `names` are the users it defines.
    pub fn import_users(&self, definitions: &std::path::Path, names: &[&str]) {
        let file = definitions.display().to_string();
        if let Err(e) = rabbitmqctl(&["import_definitions", &file]) {
            panic!("cannot import the broker definitions {file}: {e}");
        }
        let mut users = self.users.lock().unwrap_or_else(|p| p.into_inner());
        users.extend(names.iter().map(|n| (*n).to_owned()));
    }

    /// The URL logging in to this test's virtual host as `user` with `password`.
    pub fn url_of(&self, user: &str, password: &str) -> String {
        format!("amqp://{user}:{password}@127.0.0.1:5672/{}", self.vhost)
    }
}

fn rabbitmqctl(args: &[&str]) -> Result<(), String> {
    let out = Command::new("rabbitmqctl")
        .arg("-q")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run rabbitmqctl: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "rabbitmqctl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Panics with instructions when no broker answers at [`AMQP_URL`]; otherwise makes
/// a virtual host for this test (with `rabbitmqctl`, so the test must run where the
/// broker runs, as root or the rabbitmq user) and returns it.
pub fn require_rabbitmq() -> TestBroker {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("test runtime");
    if let Err(e) = rt.block_on(service_kit::amqp::probe(AMQP_URL, Duration::from_secs(5))) {
        panic!(
            "RabbitMQ not reachable at {AMQP_URL} ({e}); install rabbitmq-server and run `service rabbitmq-server start`"
        );
    }
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let vhost = format!(
        "megha-test-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    );
    let made = rabbitmqctl(&["add_vhost", &vhost])
        .and_then(|()| rabbitmqctl(&["set_permissions", "-p", &vhost, "guest", ".*", ".*", ".*"]));
    if let Err(e) = made {
        panic!("cannot make the test's own RabbitMQ virtual host {vhost}: {e}");
    }
    let url = format!("amqp://guest:guest@127.0.0.1:5672/{vhost}");
    let probed = rt.block_on(service_kit::amqp::probe(&url, Duration::from_secs(5)));
    if let Err(e) = probed {
        panic!("the test's virtual host {vhost} does not answer at {url}: {e}");
    }
    TestBroker {
        url,
        vhost,
        users: Default::default(),
    }
}
