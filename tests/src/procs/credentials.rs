//! The credentials of this test process's clusters: a cluster secret and an API
//! tokens file (an admin and two users), made once per test binary.

use std::io::Read;
use std::path::PathBuf;
use std::sync::OnceLock;

/// The credentials of this test process's clusters (one set per test binary): a
/// cluster secret and an API tokens file with an admin and two users, in a fresh
/// directory. Every [`Proc`](super::Proc) gets them through the environment
/// (`MEGHA_CLUSTER_SECRET_FILE`, `MEGHA_TOKENS_FILE`), [`loadgen`](super::loadgen()) gets the admin
/// token (`MEGHA_TOKEN`), and [`http`](super::http()) / [`http_bytes`](super::http_bytes) send the admin token and the
/// cluster secret; [`http_raw`](super::http_raw) sends only what it is given.
#[derive(Debug)]
pub struct Credentials {
    pub dir: PathBuf,
    pub secret_file: PathBuf,
    pub tokens_file: PathBuf,
    pub secret: String,
    /// An admin: sees every job, may use every queue.
    pub admin: String,
    /// User `alice`: queues `default` and `a`.
    pub alice: String,
    /// User `bob`: any queue.
    pub bob: String,
}

/// `bytes` random bytes from /dev/urandom, as hex.
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .expect("read /dev/urandom");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn credentials() -> &'static Credentials {
    static CREDS: OnceLock<Credentials> = OnceLock::new();
    CREDS.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!(
            "megha-test-creds-{}-{}",
            std::process::id(),
            random_hex(4)
        ));
        std::fs::create_dir_all(&dir).expect("credentials dir");
        let c = Credentials {
            secret_file: dir.join("cluster-secret"),
            tokens_file: dir.join("tokens.toml"),
            dir,
            secret: random_hex(24),
            admin: format!("admin-{}", random_hex(16)),
            alice: format!("alice-{}", random_hex(16)),
            bob: format!("bob-{}", random_hex(16)),
        };
        std::fs::write(&c.secret_file, format!("{}\n", c.secret)).expect("secret file");
        let tokens = format!(
            "[[users]]\nname = \"admin\"\ntoken = \"{}\"\nadmin = true\n\n\
             [[users]]\nname = \"alice\"\ntoken = \"{}\"\nqueues = [\"default\", \"a\"]\n\n\
             [[users]]\nname = \"bob\"\ntoken = \"{}\"\nqueues = [\"*\"]\n",
            c.admin, c.alice, c.bob
        );
        std::fs::write(&c.tokens_file, tokens).expect("tokens file");
        // As a deployment keeps them: the services' user's only (exec tasks run as
        // other uids and must not read them).
        private(&c.dir, 0o700);
        private(&c.secret_file, 0o600);
        private(&c.tokens_file, 0o600);
        c
    })
}

/// Writes credential files (as `scripts/make-role-credentials.sh DIR --gms 2 --lms 2`
/// does, plus the files for any process of a role) into `dir`: gm.toml, lm.toml,
/// worker.toml, gm-0.toml, gm-1.toml, lm-0.toml, lm-1.toml, all of one authority;
/// returns each file's key, to sign requests as that process would.
pub fn role_files(dir: &std::path::Path) -> RoleKeys {
    use service_kit::auth::signed::{new_seed, Authority, Identity};
    use service_kit::roles::{Role, RoleCredential};
    std::fs::create_dir_all(dir).expect("dir");
    let authority = Authority::from_seed(&new_seed().expect("seed")).expect("authority");
    let mut who: Vec<Identity> = Role::ALL
        .iter()
        .map(|&role| Identity { role, id: None })
        .collect();
    for role in [Role::Gm, Role::Lm] {
        who.extend((0..2).map(|i| Identity { role, id: Some(i) }));
    }
    let signers = who
        .into_iter()
        .map(|w| {
            let text = RoleCredential::issue(&authority, w).expect("issue");
            let name = w.file_name();
            let path = dir.join(&name);
            std::fs::write(&path, &text).expect("write");
            private(&path, 0o600);
            let signer = RoleCredential::parse(&text, "test").expect("parse").signer;
            (name.trim_end_matches(".toml").to_owned(), signer)
        })
        .collect();
    RoleKeys(signers)
}

/// The keys of a cluster's credential files, by file name without `.toml` (`gm`,
/// `lm`, `worker`: for any process of the role; `gm-0`, `lm-1`: for one).
#[derive(Debug)]
pub struct RoleKeys(pub Vec<(String, service_kit::auth::signed::Signer)>);

impl RoleKeys {
    /// The key of file `name` (`gm`, `lm-1`, ...).
    pub fn of(&self, name: &str) -> &service_kit::auth::signed::Signer {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s)
            .unwrap_or_else(|| panic!("no credential file {name}.toml"))
    }

    /// The signature header of `method url` with `body` as the holder of file `name`
    /// signs it for `callee`, timestamped `ts_ms` (now if `None`).
    pub fn sign(
        &self,
        name: &str,
        callee: service_kit::roles::Role,
        method: &str,
        url: &str,
        body: &[u8],
        ts_ms: Option<u64>,
    ) -> (&'static str, String) {
        use service_kit::auth::signed::{now_ms, Signed};
        // The request target as sent: what follows the authority.
        let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
        let target = after_scheme.find('/').map_or("/", |i| &after_scheme[i..]);
        let header = self
            .of(name)
            .header(
                &Signed {
                    callee,
                    method,
                    target,
                    body,
                },
                ts_ms.unwrap_or_else(now_ms),
            )
            .expect("sign");
        (service_kit::auth::SIGNATURE_HEADER, header)
    }
}

fn private(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}
