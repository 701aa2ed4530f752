//! The operator's tools for a cluster's credentials, beside the PKI, role and broker
//! code they drive (the `loadgen` subcommands of the same names call them):
//! - `loadgen certs`: a cluster's private CA and its certificates, for the TLS examples
//!   (docker-compose.tls.yml, k8s/make-secrets.sh) on images without openssl;
//! - `loadgen role-credentials`: each process's signing key and its certificate;
//! - `loadgen broker-users`: the broker users and their permissions;
//! - `loadgen healthcheck`: a service's `/healthz` over HTTP or HTTPS, for container
//!   healthchecks (docker/healthcheck.sh uses it when the service serves TLS).

use crate::pki::{ClusterPki, Pem};
use anyhow::{bail, Context as _, Result};
use clap::Args;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Args, Debug)]
pub struct CertsArgs {
    /// Directory to write into (made with mode 700): ca.pem and ca-key.pem, NAME.pem
    /// and NAME-key.pem per --server, worker-issuer.pem and worker-issuer-key.pem.
    /// If it already holds ca.pem, nothing is written (delete it to start afresh).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// A server certificate: NAME=HOST,HOST,... (DNS names or IP addresses; localhost
    /// and 127.0.0.1 are always added, for healthchecks). Repeat per certificate.
    #[arg(long, value_name = "NAME=HOSTS")]
    pub server: Vec<String>,
    /// Networks (CIDRs) the worker issuer may certify addresses in: where workers'
    /// advertised addresses lie (127.0.0.0/8 is always added).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16",
        value_name = "CIDR,..."
    )]
    pub worker_networks: Vec<String>,
    /// The CA's name (its certificate's subject).
    #[arg(long, default_value = "megha cluster CA", value_name = "NAME")]
    pub ca_name: String,
}

/// Parses `NAME=HOST,HOST`: a file-name-safe name and at least one host.
fn parse_server(spec: &str) -> Result<(String, Vec<String>)> {
    let Some((name, hosts)) = spec.split_once('=') else {
        bail!("--server `{spec}`: expected NAME=HOST,HOST,...");
    };
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !ok {
        bail!("--server `{spec}`: the name must be letters, digits, - or _ (it names the files)");
    }
    if name == "ca" || name == "worker-issuer" {
        bail!("--server `{spec}`: the name {name} is taken by the CA's own files");
    }
    let hosts: Vec<String> = hosts
        .split(',')
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(str::to_owned)
        .collect();
    if hosts.is_empty() {
        bail!("--server `{spec}`: no host after `=`");
    }
    Ok((name.to_owned(), hosts))
}

/// Writes `text` to `path`, readable by its owner only.
fn write_private(path: &Path, text: &str) -> Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .with_context(|| format!("write {}", path.display()))
}

fn write_pair(dir: &Path, name: &str, pem: &Pem) -> Result<()> {
    write_private(&dir.join(format!("{name}.pem")), &pem.cert)?;
    write_private(&dir.join(format!("{name}-key.pem")), &pem.key)
}

pub fn run_certs(args: CertsArgs) -> Result<()> {
    let servers = args
        .server
        .iter()
        .map(|s| parse_server(s))
        .collect::<Result<Vec<_>>>()?;
    let networks = crate::auth::WorkerNetworks::parse(&args.worker_networks)
        .map_err(|e| anyhow::anyhow!("{e:#}").context("--worker-networks"))?;
    if args.out.join("ca.pem").exists() {
        println!("certificates already in {} (kept)", args.out.display());
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&args.out)
        .with_context(|| format!("--out {}", args.out.display()))?;
    let pki = ClusterPki::generate(&args.ca_name, &servers, &networks.0)?;
    for (name, pem) in &pki.servers {
        write_pair(&args.out, name, pem)?;
    }
    write_pair(&args.out, "worker-issuer", &pki.worker_issuer)?;
    // ca.pem last: its presence means the set is complete.
    write_private(&args.out.join("ca-key.pem"), &pki.ca.key)?;
    write_private(&args.out.join("ca.pem"), &pki.ca.cert)?;
    let names: Vec<&str> = servers.iter().map(|(n, _)| n.as_str()).collect();
    println!(
        "certificates written to {}: ca.pem (trust it), ca-key.pem (keep it offline), {} and worker-issuer (workers only)",
        args.out.display(),
        if names.is_empty() {
            "no server".to_owned()
        } else {
            names.join(", ")
        }
    );
    Ok(())
}

#[derive(Args, Debug)]
pub struct RoleCredentialsArgs {
    /// Directory to write into (made with mode 700): `ca-key`, the cluster's
    /// credential authority (keep it; no process needs it), and one credential file
    /// per process: its ed25519 key and the key's certificate. Files already there
    /// of this authority are kept, missing ones issued (run again with a larger
    /// --lms to add an LM); files of earlier forms are replaced.
    pub dir: PathBuf,
    /// One file per GM, gm-0.toml .. gm-(N-1).toml, each usable only by the GM of
    /// that --id. Without it, one gm.toml for every GM.
    #[arg(long, value_name = "N")]
    pub gms: Option<u16>,
    /// One file per LM, lm-0.toml .. lm-(N-1).toml, each usable only by the LM of
    /// that --id. Without it, one lm.toml for every LM.
    #[arg(long, value_name = "N")]
    pub lms: Option<u16>,
}

/// `loadgen role-credentials DIR`: the credential files of a cluster's processes.
pub fn run_role_credentials(args: RoleCredentialsArgs) -> Result<()> {
    use crate::auth::signed::{new_seed, Authority, Identity};
    use crate::roles::{hex, unhex, Role, RoleCredential};
    let dir = &args.dir;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("DIR {}", dir.display()))?;
    let ca_path = dir.join("ca-key");
    let authority = match std::fs::read_to_string(&ca_path) {
        Ok(text) => Authority::from_seed(
            &unhex(text.trim()).with_context(|| format!("{}: 64 hex digits", ca_path.display()))?,
        )?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let seed = new_seed()?;
            write_new(dir, "ca-key", &format!("{}\n", hex(&seed)))?;
            Authority::from_seed(&seed)?
        }
        Err(e) => return Err(e).with_context(|| format!("read {}", ca_path.display())),
    };
    let per = |role: Role, n: Option<u16>| -> Vec<Identity> {
        match n {
            Some(n) => (0..n).map(|i| Identity { role, id: Some(i) }).collect(),
            None => vec![Identity { role, id: None }],
        }
    };
    let mut wanted = per(Role::Gm, args.gms);
    wanted.extend(per(Role::Lm, args.lms));
    wanted.extend(per(Role::Worker, None));
    let (mut kept, mut issued) = (Vec::new(), Vec::new());
    for who in wanted {
        let name = who.file_name();
        let current = std::fs::read_to_string(dir.join(&name))
            .ok()
            .and_then(|t| RoleCredential::parse(&t, &name).ok())
            .is_some_and(|c| c.verifier.ca() == &authority.public_key());
        if current {
            kept.push(name);
        } else {
            write_new(dir, &name, &RoleCredential::issue(&authority, who)?)?;
            issued.push(name);
        }
    }
    println!(
        "role credentials in {}: issued {}; kept {} (give each process its own file; keep ca-key offline)",
        dir.display(),
        if issued.is_empty() { "none".to_owned() } else { issued.join(", ") },
        if kept.is_empty() { "none".to_owned() } else { kept.join(", ") },
    );
    Ok(())
}

/// Writes `name` in `dir` (mode 600) aside and renames it into place: a reader never
/// sees half a file, and a symlink planted at the name is replaced, not followed.
fn write_new(dir: &Path, name: &str, text: &str) -> Result<()> {
    let path = dir.join(name);
    let tmp = dir.join(format!(".{name}.new"));
    let _ = std::fs::remove_file(&tmp);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .with_context(|| format!("write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("write {}", path.display()))
}

#[derive(Args, Debug)]
pub struct BrokerUsersArgs {
    /// The cluster's name (the exchanges' prefix).
    #[arg(long, env = "MEGHA_CLUSTER_NAME", default_value = "megha")]
    pub cluster_name: String,
    /// Print the permissions of one kind of user (lm, gm or observer) as three
    /// words, configure, write and read, for `rabbitmqctl set_permissions`.
    #[arg(long, value_name = "lm|gm|observer", conflicts_with = "user")]
    pub permissions: Option<String>,
    /// A user of the definitions file to print (RabbitMQ's `load_definitions`):
    /// NAME=KIND=PASSWORD_FILE, KIND lm, gm or observer. Repeat per user.
    #[arg(long, value_name = "NAME=KIND=FILE")]
    pub user: Vec<String>,
    /// The virtual host of the definitions file.
    #[arg(long, default_value = "/")]
    pub vhost: String,
}

/// `loadgen broker-users`: the broker users of a cluster and their permissions
/// (only LMs write the state exchange, only LMs and GMs the events; issue 32).
pub fn run_broker_users(args: BrokerUsersArgs) -> Result<()> {
    use crate::topology::{broker_permissions, rabbit_password_hash, BrokerUser};
    let cluster = common::ClusterName::new(&args.cluster_name)
        .map_err(|e| anyhow::anyhow!("--cluster-name: {e}"))?;
    let kind = |text: &str, field: &str| {
        BrokerUser::parse(text)
            .with_context(|| format!("{field}: `{text}` is not lm, gm or observer"))
    };
    if let Some(k) = &args.permissions {
        println!(
            "{}",
            broker_permissions(&cluster, kind(k, "--permissions")?).join(" ")
        );
        return Ok(());
    }
    if args.user.is_empty() {
        bail!("give --permissions KIND, or --user NAME=KIND=FILE for a definitions file");
    }
    let (mut users, mut permissions) = (Vec::new(), Vec::new());
    for u in &args.user {
        let mut parts = u.splitn(3, '=');
        let (Some(name), Some(k), Some(file)) = (parts.next(), parts.next(), parts.next()) else {
            bail!("--user `{u}`: NAME=KIND=PASSWORD_FILE");
        };
        let password = std::fs::read_to_string(file)
            .with_context(|| format!("--user {name}: password file {file}"))?;
        let salt: [u8; 4] = crate::auth::signed::new_seed()?[..4]
            .try_into()
            .unwrap_or_default();
        users.push(serde_json::json!({
            "name": name,
            "password_hash": rabbit_password_hash(password.trim(), salt),
            "hashing_algorithm": "rabbit_password_hashing_sha256",
            "tags": "",
        }));
        let [configure, write, read] = broker_permissions(&cluster, kind(k, "--user")?);
        permissions.push(serde_json::json!({
            "user": name, "vhost": args.vhost,
            "configure": configure, "write": write, "read": read,
        }));
    }
    let definitions = serde_json::json!({
        "users": users,
        "vhosts": [{"name": args.vhost}],
        "permissions": permissions,
    });
    println!("{}", serde_json::to_string_pretty(&definitions)?);
    Ok(())
}

#[derive(Args, Debug)]
pub struct HealthcheckArgs {
    /// The service's base URL (http:// or https://), e.g. https://127.0.0.1:8080.
    pub url: String,
    /// Healthy only once the service also says "ready": true (a GM with the state of
    /// every LM).
    #[arg(long)]
    pub ready: bool,
    /// A CA (PEM) to trust for https://, besides the system roots.
    #[arg(long, env = "MEGHA_TLS_CA_FILE", value_name = "FILE")]
    pub tls_ca_file: Option<PathBuf>,
    /// Give up after this many milliseconds.
    #[arg(long, default_value_t = 3000, value_name = "MS")]
    pub timeout_ms: u64,
}

/// Why `/healthz`'s answer is not healthy, if it is not.
fn unhealthy(body: &serde_json::Value, ready: bool) -> Option<String> {
    if body["status"] != "ok" {
        return Some(format!("status is {}", body["status"]));
    }
    if ready && body["ready"] != true {
        return Some(format!("not ready (ready: {})", body["ready"]));
    }
    None
}

pub fn run_healthcheck(args: HealthcheckArgs) -> Result<()> {
    if let Some(ca) = &args.tls_ca_file {
        crate::tls::trust_ca(ca)?;
    }
    let url = format!("{}/healthz", args.url.trim_end_matches('/'));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let body: serde_json::Value = rt.block_on(async {
        let client = crate::tls::client_builder()
            .timeout(Duration::from_millis(args.timeout_ms))
            .build()?;
        let resp = client
            .get(&url)
            .send()
            .await
            .with_context(|| format!("GET {url}"))?;
        let status = resp.status();
        if !status.is_success() {
            bail!("GET {url}: {status}");
        }
        resp.json()
            .await
            .with_context(|| format!("GET {url}: not JSON"))
    })?;
    if let Some(why) = unhealthy(&body, args.ready) {
        bail!("{url}: {why}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_credentials_keep_their_authoritys_files_and_replace_planted_ones() {
        use crate::roles::RoleCredential;
        let dir = std::env::temp_dir().join(format!("megha-rolecreds-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let args = |lms| RoleCredentialsArgs {
            dir: dir.clone(),
            gms: Some(1),
            lms: Some(lms),
        };
        run_role_credentials(args(1)).expect("first run");
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).expect(name);
        let gm0 = read("gm-0.toml");
        // A file planted as a symlink to a file outside DIR, and one of another
        // authority: both replaced, the outside file untouched; GM 0's kept; LM 1
        // issued (a larger --lms adds an LM).
        let outside = dir.with_extension("outside");
        std::fs::write(&outside, "not a credential").expect("outside");
        std::fs::remove_file(dir.join("lm-0.toml")).expect("rm");
        std::os::unix::fs::symlink(&outside, dir.join("lm-0.toml")).expect("symlink");
        let stranger = dir.with_extension("stranger");
        run_role_credentials(RoleCredentialsArgs {
            dir: stranger.clone(),
            gms: None,
            lms: None,
        })
        .expect("another authority");
        std::fs::copy(stranger.join("worker.toml"), dir.join("worker.toml")).expect("copy");
        run_role_credentials(args(2)).expect("second run");
        assert_eq!(read("gm-0.toml"), gm0, "GM 0's file kept");
        assert_eq!(
            std::fs::read_to_string(&outside).expect("outside"),
            "not a credential"
        );
        let ca = read("ca-key");
        for name in ["gm-0.toml", "lm-0.toml", "lm-1.toml", "worker.toml"] {
            assert!(!std::fs::symlink_metadata(dir.join(name))
                .expect(name)
                .is_symlink());
            let c = RoleCredential::parse(&read(name), name).expect(name);
            let authority = crate::auth::signed::Authority::from_seed(
                &crate::roles::unhex(ca.trim()).expect("ca-key"),
            )
            .expect("authority");
            assert_eq!(c.verifier.ca(), &authority.public_key(), "{name}");
        }
        for d in [&dir, &stranger] {
            let _ = std::fs::remove_dir_all(d);
        }
        let _ = std::fs::remove_file(&outside);
    }

    #[test]
    fn broker_users_refuse_bad_input_naming_the_field() {
        let args = |permissions: Option<&str>, user: &[&str]| BrokerUsersArgs {
            cluster_name: "megha".into(),
            permissions: permissions.map(Into::into),
            user: user.iter().map(|u| (*u).to_owned()).collect(),
            vhost: "/".into(),
        };
        for (a, field) in [
            (args(Some("boss"), &[]), "--permissions"),
            (args(None, &[]), "--user"),
            (args(None, &["megha-gm=gm"]), "--user"),
            (args(None, &["megha-gm=boss=/dev/null"]), "--user"),
            (
                args(None, &["megha-gm=gm=/nonexistent/pw"]),
                "password file",
            ),
        ] {
            let err = format!("{:#}", run_broker_users(a).expect_err(field));
            assert!(err.contains(field), "{field}: {err}");
        }
        let mut bad_name = args(Some("lm"), &[]);
        bad_name.cluster_name = "Bad Name".into();
        assert!(
            format!("{:#}", run_broker_users(bad_name).expect_err("name"))
                .contains("--cluster-name")
        );
    }

    #[test]
    fn server_specs_name_the_files_and_hosts() {
        let (name, hosts) = parse_server("gm=global-master-0, 10.0.0.1").expect("ok");
        assert_eq!(name, "gm");
        assert_eq!(hosts, ["global-master-0", "10.0.0.1"]);
        for bad in ["gm", "=a", "../x=a", "gm=", "ca=a", "worker-issuer=a"] {
            let err = parse_server(bad).expect_err(bad);
            assert!(err.to_string().contains("--server"), "{err}");
        }
    }

    #[test]
    fn certs_writes_a_complete_set_once_with_private_modes() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("tls");
        let args = || CertsArgs {
            out: out.clone(),
            server: vec!["gm=global-master-0".into(), "lm=local-master-0".into()],
            worker_networks: vec!["172.16.0.0/12".into()],
            ca_name: "test".into(),
        };
        run_certs(args()).expect("first run");
        for f in [
            "ca.pem",
            "ca-key.pem",
            "gm.pem",
            "gm-key.pem",
            "lm.pem",
            "lm-key.pem",
            "worker-issuer.pem",
            "worker-issuer-key.pem",
        ] {
            let meta = std::fs::metadata(out.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
            assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{f}");
        }
        let before = std::fs::read_to_string(out.join("ca.pem")).expect("ca");
        run_certs(args()).expect("second run");
        let after = std::fs::read_to_string(out.join("ca.pem")).expect("ca");
        assert_eq!(before, after, "a second run keeps the CA");
        // The issuer written is one a worker can issue with, in its networks only.
        let issuer = Pem {
            cert: std::fs::read_to_string(out.join("worker-issuer.pem")).expect("issuer"),
            key: std::fs::read_to_string(out.join("worker-issuer-key.pem")).expect("key"),
        };
        crate::pki::issue_worker_cert(&issuer, "172.20.0.5".parse().expect("ip"))
            .expect("inside 172.16.0.0/12");
        assert!(crate::pki::issue_worker_cert(&issuer, "10.0.0.5".parse().expect("ip")).is_err());
    }

    #[test]
    fn healthy_means_status_ok_and_ready_when_asked() {
        let ok = serde_json::json!({"status": "ok", "ready": false});
        assert_eq!(unhealthy(&ok, false), None);
        assert!(unhealthy(&ok, true).is_some_and(|w| w.contains("not ready")));
        let bad = serde_json::json!({"status": "draining"});
        assert!(unhealthy(&bad, false).is_some());
    }
}
