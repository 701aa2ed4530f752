//! The Kubernetes manifests in `k8s/`, checked offline:
//! - `kubernetes-validate --strict` (PyPI; ships the API schemas) accepts every
//!   manifest and the Secret `k8s/make-secrets.sh` prints, for Kubernetes 1.28 (the
//!   first with the pod-index label the ids come from) and the validator's newest;
//! - every setting a container gets (flags, `MEGHA_*` variables, the keys of the
//!   ConfigMaps it loads) is a flag of its binary, shown by its `--help`, and the
//!   settings resolve as the binary would resolve them (the generated secrets as
//!   files);
//! - the counts agree: GM and LM replicas, `MEGHA_GMS`/`MEGHA_LMS`, the URL lists
//!   (URL i names pod ordinal i), one worker Deployment per LM with
//!   `MEGHA_LM_WORKERS` replicas; every Secret key mounted exists;
//! - TLS is on: every scheduler container serves HTTPS (a certificate, or the worker
//!   issuer), every URL is https:// or amqps://, probes ask over HTTPS, and the
//!   generated certificates verify, through the generated CA, for the very names
//!   the URLs use (a worker's for its pod IP).
//!
//! Fails (never skips) when `kubernetes-validate` or `python3` with PyYAML (its
//! dependency) is missing: `pip install kubernetes-validate` (scripts/test.sh does).

use clap::CommandFactory;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use tests::procs::{bin_dir, workspace_root};

const IMAGE: &str = "megha/scheduler";
/// The ordinal and pod IP the checks stand in for the downward API.
const POD_INDEX: &str = "1";
const POD_IP: &str = "10.1.2.3";

fn k8s_dir() -> PathBuf {
    workspace_root().join("k8s")
}

fn manifests() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(k8s_dir())
        .expect("k8s/")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .filter(|p| p.file_name().is_some_and(|n| n != "kustomization.yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "manifests in k8s/: {files:?}");
    files
}

/// The YAML documents of `text`, as JSON (PyYAML, kubernetes-validate's dependency).
fn yaml_docs(text: &str) -> Vec<Value> {
    let script = "import sys, json, yaml\nprint(json.dumps([d for d in yaml.safe_load_all(sys.stdin) if d]))";
    let out =
        run_with_stdin(Command::new("python3").args(["-c", script]), text).unwrap_or_else(|e| {
            panic!("python3 with PyYAML is needed (pip install kubernetes-validate): {e}")
        });
    serde_json::from_str(&out).expect("PyYAML's JSON")
}

fn run_with_stdin(cmd: &mut Command, input: &str) -> Result<String, String> {
    use std::io::Write;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{:?}: {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The Secret `k8s/make-secrets.sh` prints, as text (its certificates made by this
/// build's `loadgen`).
fn generated_secret() -> String {
    let out = Command::new(k8s_dir().join("make-secrets.sh"))
        .env("LOADGEN", bin_dir().join("loadgen"))
        .output()
        .expect("run k8s/make-secrets.sh");
    assert!(out.status.success(), "make-secrets.sh: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8")
}

fn validate(files: &[PathBuf], version: &str) {
    let out = Command::new("kubernetes-validate")
        .args(["--strict", "--quiet", "-k", version])
        .args(files)
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run kubernetes-validate ({e}): pip install kubernetes-validate")
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && !text.contains("ERROR"),
        "kubernetes-validate -k {version}: {text}"
    );
}

#[test]
fn manifests_and_the_generated_secret_validate_offline() {
    let dir = std::env::temp_dir().join(format!("megha-k8s-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let secret = dir.join("secret.yaml");
    std::fs::write(&secret, generated_secret()).expect("write secret");
    let mut files = manifests();
    files.push(secret);
    for version in ["1.28.0", "1.37.0"] {
        validate(&files, version);
    }
    let _ = std::fs::remove_dir_all(&dir);
    // kustomization.yaml (no schema) lists every manifest.
    let kustomization =
        std::fs::read_to_string(k8s_dir().join("kustomization.yaml")).expect("kustomization.yaml");
    let listed: BTreeSet<String> = yaml_docs(&kustomization)[0]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|r| r.as_str().expect("a file name").to_owned())
        .collect();
    let present: BTreeSet<String> = manifests()
        .iter()
        .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
        .collect();
    assert_eq!(listed, present, "kustomization.yaml lists every manifest");
}

/// Every document of every manifest.
fn all_docs() -> Vec<(String, Value)> {
    manifests()
        .iter()
        .flat_map(|p| {
            let name = p.file_name().expect("name").to_string_lossy().into_owned();
            let text = std::fs::read_to_string(p).expect("manifest");
            yaml_docs(&text).into_iter().map(move |d| (name.clone(), d))
        })
        .collect()
}

fn named<'a>(docs: &'a [(String, Value)], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .map(|(_, d)| d)
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in k8s/"))
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

/// The environment a container starts with: its ConfigMaps' keys, then its `env`
/// (downward API fields stood in for, `$(VAR)` expanded as the kubelet does).
fn container_env(docs: &[(String, Value)], c: &Value) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = Vec::new();
    for from in c["envFrom"].as_array().into_iter().flatten() {
        let cm = named(docs, "ConfigMap", str_of(&from["configMapRef"]["name"]));
        for (k, v) in cm["data"].as_object().expect("ConfigMap data") {
            env.push((k.clone(), str_of(v).to_owned()));
        }
    }
    for e in c["env"].as_array().into_iter().flatten() {
        let name = str_of(&e["name"]).to_owned();
        let value = if let Some(v) = e["value"].as_str() {
            let mut v = v.to_owned();
            for (k, val) in &env {
                v = v.replace(&format!("$({k})"), val);
            }
            v
        } else {
            match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
                Some("metadata.labels['apps.kubernetes.io/pod-index']") => POD_INDEX.into(),
                Some("status.podIP") => POD_IP.into(),
                _ => format!("<{}>", e["valueFrom"]),
            }
        };
        env.retain(|(k, _)| *k != name);
        env.push((name, value));
    }
    env
}

/// The flags of `env` and `args` for `cmd`, or the settings it does not know.
fn flags_of(
    cmd: &clap::Command,
    env: &[(String, String)],
    args: &[String],
    secrets: &Path,
) -> Result<Vec<String>, Vec<String>> {
    let mut flags = Vec::new();
    let mut unknown = Vec::new();
    let longs: BTreeSet<&str> = cmd.get_arguments().filter_map(|a| a.get_long()).collect();
    for a in args {
        if let Some(long) = a.strip_prefix("--") {
            if !longs.contains(long.split('=').next().unwrap_or(long)) {
                unknown.push(a.clone());
            }
        }
        flags.push(a.clone());
    }
    for (name, value) in env {
        let value = value.replace("/secrets/", &format!("{}/", secrets.display()));
        if name == service_kit::amqp::PASSWORD_FILE_ENV {
            // Read by the broker link, not a flag (service-kit's amqp module).
            assert!(
                Path::new(&value).is_file(),
                "{name}={value}: no such secret key"
            );
            continue;
        }
        if !name.starts_with("MEGHA_") {
            continue;
        }
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_env().is_some_and(|e| e == name.as_str()));
        match arg.and_then(|a| a.get_long()) {
            Some(long) if !value.is_empty() => flags.push(format!("--{long}={value}")),
            Some(_) => {}
            None => unknown.push(name.clone()),
        }
    }
    if unknown.is_empty() {
        Ok(flags)
    } else {
        Err(unknown)
    }
}

/// Resolves `flags` as binary `bin` would; the error names the first bad setting.
fn resolve(bin: &str, flags: &[String]) -> Result<(), String> {
    let argv = std::iter::once(bin.to_owned()).chain(flags.iter().cloned());
    let e = |e: &dyn std::fmt::Display| e.to_string();
    match bin {
        "global-master" => {
            use global_master::service::config::GmArgs;
            let args = <GmArgs as clap::Parser>::try_parse_from(argv).map_err(|x| e(&x))?;
            args.resolve().map(drop).map_err(|x| format!("{x:#}"))
        }
        "local-master" => {
            use local_master::service::config::LmArgs;
            let args = <LmArgs as clap::Parser>::try_parse_from(argv).map_err(|x| e(&x))?;
            args.resolve().map(drop).map_err(|x| format!("{x:#}"))
        }
        "worker" => {
            use worker::service::config::WorkerArgs;
            let args = <WorkerArgs as clap::Parser>::try_parse_from(argv).map_err(|x| e(&x))?;
            args.resolve().map(drop).map_err(|x| format!("{x:#}"))
        }
        other => Err(format!("unknown binary {other}")),
    }
}

fn command_of(bin: &str) -> clap::Command {
    match bin {
        "global-master" => global_master::service::config::GmArgs::command(),
        "local-master" => local_master::service::config::LmArgs::command(),
        "worker" => worker::service::config::WorkerArgs::command(),
        other => panic!("a container runs {other}, which is not a Megha binary"),
    }
}

/// The generated Secret's keys, written as files into `dir`.
fn write_secret_files(dir: &Path) -> BTreeSet<String> {
    let secret = &yaml_docs(&generated_secret())[0];
    std::fs::create_dir_all(dir).expect("secrets dir");
    let mut keys = BTreeSet::new();
    for (k, v) in secret["data"].as_object().expect("Secret data") {
        let plain = run_with_stdin(Command::new("base64").arg("-d"), str_of(v)).expect("base64 -d");
        std::fs::write(dir.join(k), plain).expect("write secret key");
        keys.insert(k.clone());
    }
    keys
}

#[test]
fn every_setting_of_every_container_is_a_flag_of_its_binary_and_resolves() {
    let docs = all_docs();
    let secrets = std::env::temp_dir().join(format!("megha-k8s-secrets-{}", std::process::id()));
    let keys = write_secret_files(&secrets);
    let mut problems = Vec::new();
    let mut checked = 0;
    for (file, d) in &docs {
        let spec = &d["spec"]["template"]["spec"];
        for c in spec["containers"].as_array().into_iter().flatten() {
            let image = str_of(&c["image"]);
            if !image.starts_with(IMAGE) {
                continue;
            }
            let command: Vec<String> = c["command"]
                .as_array()
                .expect("a scheduler container names its binary in `command`")
                .iter()
                .chain(c["args"].as_array().into_iter().flatten())
                .map(|v| str_of(v).to_owned())
                .collect();
            let bin = command[0].as_str();
            let where_ = format!("{file}: {} {}", d["kind"], d["metadata"]["name"]);
            let env = container_env(&docs, c);
            match flags_of(&command_of(bin), &env, &command[1..], &secrets) {
                Err(unknown) => problems.push(format!(
                    "{where_}: {unknown:?} are not flags of `{bin} --help`"
                )),
                Ok(flags) => {
                    if let Err(e) = resolve(bin, &flags) {
                        problems.push(format!(
                            "{where_}: `{bin} {}` does not resolve: {e}",
                            flags.join(" ")
                        ));
                    }
                }
            }
            checked += 1;
        }
        // Every Secret key a pod mounts or reads exists in the generated Secret.
        let volumes = spec["volumes"].as_array().into_iter().flatten();
        let mounted = volumes.flat_map(|v| v["secret"]["items"].as_array().into_iter().flatten());
        let refs = spec["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|c| c["env"].as_array().into_iter().flatten())
            .map(|e| &e["valueFrom"]["secretKeyRef"]["key"])
            .filter(|k| k.is_string());
        for key in mounted.map(|i| &i["key"]).chain(refs) {
            if !keys.contains(str_of(key)) {
                problems.push(format!(
                    "{file}: Secret key {key} is not made by make-secrets.sh"
                ));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&secrets);
    assert!(checked >= 5, "scheduler containers checked: {checked}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

fn replicas(d: &Value) -> usize {
    d["spec"]["replicas"].as_u64().expect("replicas") as usize
}

fn urls(cm: &Value, key: &str) -> Vec<String> {
    str_of(&cm["data"][key])
        .split(',')
        .map(str::to_owned)
        .collect()
}

#[test]
fn counts_and_urls_agree_and_ids_are_pod_ordinals() {
    let docs = all_docs();
    let gm = named(&docs, "StatefulSet", "megha-gm");
    let lm = named(&docs, "StatefulSet", "megha-lm");
    let (gms, lms) = (replicas(gm), replicas(lm));
    let gm_cm = named(&docs, "ConfigMap", "megha-gm");
    let lm_cm = named(&docs, "ConfigMap", "megha-lm");
    let number = |cm: &Value, k: &str| str_of(&cm["data"][k]).parse::<usize>().expect(k);
    assert_eq!(number(gm_cm, "MEGHA_GMS"), gms);
    assert_eq!(number(lm_cm, "MEGHA_GMS"), gms);
    assert_eq!(number(lm_cm, "MEGHA_LMS"), lms);
    let gm_urls: Vec<String> = (0..gms)
        .map(|i| format!("https://megha-gm-{i}.megha-gm:8080"))
        .collect();
    let lm_urls: Vec<String> = (0..lms)
        .map(|i| format!("https://megha-lm-{i}.megha-lm:9100"))
        .collect();
    assert_eq!(
        urls(gm_cm, "MEGHA_GM_URLS"),
        gm_urls,
        "GM URL i is pod ordinal i"
    );
    assert_eq!(
        urls(lm_cm, "MEGHA_GM_URLS"),
        gm_urls,
        "GM URL i is pod ordinal i"
    );
    assert_eq!(
        urls(gm_cm, "MEGHA_LM_URLS"),
        lm_urls,
        "LM URL i is pod ordinal i"
    );
    for (set, id) in [(gm, "MEGHA_GM_ID"), (lm, "MEGHA_LM_ID")] {
        let c = &set["spec"]["template"]["spec"]["containers"][0];
        let env = c["env"].as_array().expect("env");
        let e = env.iter().find(|e| e["name"] == id).expect(id);
        assert_eq!(
            e["valueFrom"]["fieldRef"]["fieldPath"],
            json!("metadata.labels['apps.kubernetes.io/pod-index']"),
            "{id} is the pod ordinal"
        );
    }
    // One worker Deployment per LM, each of MEGHA_LM_WORKERS replicas, on its LM.
    let workers: Vec<&Value> = docs
        .iter()
        .map(|(_, d)| d)
        .filter(|d| d["kind"] == "Deployment")
        .filter(|d| str_of(&d["metadata"]["name"]).starts_with("megha-worker-"))
        .collect();
    assert_eq!(workers.len(), lms, "one worker Deployment per LM");
    let per_lm = number(lm_cm, "MEGHA_LM_WORKERS");
    let mut targets = BTreeMap::new();
    for w in &workers {
        assert_eq!(
            replicas(w),
            per_lm,
            "{}: replicas = MEGHA_LM_WORKERS",
            w["metadata"]["name"]
        );
        let env = container_env(&docs, &w["spec"]["template"]["spec"]["containers"][0]);
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("MEGHA_WORKER_SLOT").as_deref(), Some("auto"));
        let lm_url = get("MEGHA_WORKER_LM_URL").expect("MEGHA_WORKER_LM_URL");
        targets.insert(lm_url, w["metadata"]["name"].clone());
    }
    let expected: BTreeSet<&String> = lm_urls.iter().collect();
    assert_eq!(
        targets.keys().collect::<BTreeSet<_>>(),
        expected,
        "every LM has its workers"
    );
    // The GM journal is on a volume of its own per GM.
    let claim = &gm["spec"]["volumeClaimTemplates"][0]["metadata"]["name"];
    let data_dir = str_of(&gm_cm["data"]["MEGHA_GM_DATA_DIR"]);
    let mounts = gm["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
        .as_array()
        .expect("mounts");
    assert!(
        mounts
            .iter()
            .any(|m| m["name"] == *claim && m["mountPath"] == data_dir),
        "--data-dir {data_dir} is the mounted claim {claim}"
    );
}

/// The host of `url` (scheme://[user@]host:port/...).
fn host_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or(rest);
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    host_port.split(':').next().unwrap_or(host_port).to_owned()
}

/// Verifies the chain in PEM file `chain` for `name`, trusting only the CA `ca`.
fn verify_for(ca: &Path, chain: &Path, name: &str) -> Result<(), String> {
    use rustls::client::danger::ServerCertVerifier as _;
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    service_kit::tls::install_provider();
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(ca).map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let verifier = rustls::client::WebPkiServerVerifier::builder(roots.into())
        .build()
        .map_err(|e| e.to_string())?;
    let certs: Vec<CertificateDer> = CertificateDer::pem_file_iter(chain)
        .map_err(|e| e.to_string())?
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let name = ServerName::try_from(name.to_owned()).map_err(|e| e.to_string())?;
    verifier
        .verify_server_cert(&certs[0], &certs[1..], &name, &[], UnixTime::now())
        .map(drop)
        .map_err(|e| format!("{e}"))
}

#[test]
fn tls_is_on_everywhere_and_the_certificates_name_the_urls_hosts() {
    let docs = all_docs();
    let secrets = std::env::temp_dir().join(format!("megha-k8s-tls-{}", std::process::id()));
    write_secret_files(&secrets);
    let ca = secrets.join("ca.pem");
    let mut problems = Vec::new();
    let mut urls_checked = 0;
    for (file, d) in &docs {
        let spec = &d["spec"]["template"]["spec"];
        for c in spec["containers"].as_array().into_iter().flatten() {
            if !str_of(&c["image"]).starts_with(IMAGE) {
                continue;
            }
            let where_ = format!("{file}: {}", d["metadata"]["name"]);
            let env = container_env(&docs, c);
            let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            let file_of = |k: &str| get(k).map(|v| secrets.join(v.trim_start_matches("/secrets/")));
            if get("MEGHA_TLS_CA_FILE").as_deref() != Some("/secrets/ca.pem") {
                problems.push(format!("{where_}: does not trust /secrets/ca.pem"));
            }
            // The certificate it serves, if from a file (GMs, LMs).
            let served = file_of("MEGHA_TLS_CERT_FILE");
            let issuer = file_of("MEGHA_TLS_ISSUER_CERT_FILE");
            if served.is_none() && issuer.is_none() {
                problems.push(format!("{where_}: serves plain HTTP"));
            }
            // Every URL it is given is TLS, and the certificate behind it names its host.
            for (k, v) in &env {
                for url in v.split(',').filter(|u| u.contains("://")) {
                    if !url.starts_with("https://") && !url.starts_with("amqps://") {
                        problems.push(format!("{where_}: {k} {url} is not TLS"));
                        continue;
                    }
                    let host = host_of(url);
                    let cert = match host.split('-').take(2).collect::<Vec<_>>()[..] {
                        ["megha", "gm"] => secrets.join("gm.pem"),
                        ["megha", "lm"] => secrets.join("lm.pem"),
                        ["megha", "rabbitmq"] => secrets.join("rabbitmq.pem"),
                        _ if host == POD_IP => {
                            // A worker's own address: the certificate it issues.
                            let pem = |p: &Path| std::fs::read_to_string(p).expect("pem");
                            let issuer = service_kit::pki::Pem {
                                cert: pem(&secrets.join("worker-issuer.pem")),
                                key: pem(&secrets.join("worker-issuer-key.pem")),
                            };
                            let issued = service_kit::pki::issue_worker_cert(
                                &issuer,
                                POD_IP.parse().expect("ip"),
                            )
                            .expect("a worker issues a certificate for its pod IP");
                            let path = secrets.join("issued-worker.pem");
                            std::fs::write(&path, issued.cert).expect("write");
                            path
                        }
                        _ => {
                            problems.push(format!("{where_}: {k} {url}: whose host is it?"));
                            continue;
                        }
                    };
                    if let Err(e) = verify_for(&ca, &cert, &host) {
                        problems.push(format!(
                            "{where_}: {k} {url}: {} does not verify for {host}: {e}",
                            cert.display()
                        ));
                    }
                    urls_checked += 1;
                }
            }
            for probe in ["readinessProbe", "livenessProbe"] {
                let http = &c[probe]["httpGet"];
                if http.is_object() && http["scheme"] != "HTTPS" {
                    problems.push(format!("{where_}: {probe} asks over plain HTTP"));
                }
            }
        }
    }
    // The broker: TLS listener only, on the port its Service and the URLs name.
    let conf = named(&docs, "ConfigMap", "megha-rabbitmq");
    let text = str_of(&conf["data"]["20-megha-tls.conf"]);
    for expected in ["listeners.tcp = none", "listeners.ssl.default = 5671"] {
        if !text.contains(expected) {
            problems.push(format!(
                "rabbitmq.yaml: the broker configuration lacks {expected}"
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&secrets);
    assert!(urls_checked >= 10, "URLs checked: {urls_checked}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
