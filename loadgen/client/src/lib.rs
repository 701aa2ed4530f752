//! `megha`, the command-line client: submit jobs, list them, follow one, cancel it,
//! read a task's output and look at the nodes, against a global master's public API.
//! Human tables by default, `--json` for scripts. Its own crate (package `megha-client`,
//! binary `megha`, built as `target/<profile>/megha`), so that a newcomer looking for the
//! client finds it, and the client links no scheduler code.
//!
//! Layout:
//! - this file: the commands; `args`: the arguments ([`Cli`]); `src/main.rs`: the binary;
//! - [`render`]: the tables (pure, unit-tested);
//! - [`top`]: the summary of `megha top` (pure, unit-tested);
//! - [`health`]: down and drained nodes, LMs not ready, from the LMs' own lists;
//! - [`ops`]: `megha node drain|undrain` and `megha usage` (pure parts);
//! - [`outcome`]: a job's outcome as an exit status (pure, unit-tested);
//! - [`wait`]: `megha wait` and `megha run --wait` (polling the GM);
//! - [`logs`]: `megha logs` (waiting for a task that has not started, following);
//! - `flags`: the values of flags and job files (pure, unit-tested).

mod args;
mod describe;
mod flags;
mod gm;
pub mod logs;

pub(crate) use gm::Gm;
pub mod health;
pub mod ops;
pub mod outcome;
pub mod render;
pub mod top;
pub mod wait;

use anyhow::{bail, Context, Result};
use clap::Parser;
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

pub use args::{Cli, Command, NodeAction, WaitArgs};
use flags::{absolute, encode, read_job_file};

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("megha: cannot start: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("megha: {e:#}");
            ExitCode::from(outcome::ERROR)
        }
    }
}

/// Runs a command; its exit status (0 unless a command exits with an outcome).
async fn run(cli: Cli) -> Result<u8> {
    if let Some(ca) = &cli.tls_ca_file {
        service_kit::tls::trust_ca(ca)?;
    }
    let token = service_kit::auth::user_token(cli.token_file.as_deref())?;
    // No overall timeout: `logs --follow` streams for as long as the task runs.
    let gm = Gm::new(
        &cli.gm,
        service_kit::auth::user_client(None, token.as_deref()),
    );
    let out = &mut std::io::stdout().lock();
    let print = |out: &mut dyn Write, value: &Value, table: String| -> Result<()> {
        if cli.json {
            writeln!(out, "{}", serde_json::to_string_pretty(value)?)?;
        } else {
            write!(out, "{table}")?;
        }
        Ok(())
    };
    let done = |r: Result<()>| r.map(|()| 0u8);
    match cli.command {
        Command::Run {
            file,
            count,
            cpu_millis,
            memory_mb,
            queue,
            max_attempts,
            user,
            cwd,
            env,
            name,
            labels,
            after,
            wait,
            wait_options,
            command,
        } => {
            let source = file.clone();
            let body = match (file, command.is_empty()) {
                (Some(_), true) if cwd.is_some() || !env.is_empty() || user.is_some() => {
                    bail!("--cwd, --env and --user go with a command after --; a job file says them itself")
                }
                (Some(path), true) => read_job_file(&path)?,
                (None, false) => {
                    let mut executor = json!({"type": "exec", "command": command});
                    if !env.is_empty() {
                        executor["env"] = json!(env
                            .into_iter()
                            .collect::<std::collections::BTreeMap<_, _>>());
                    }
                    if let Some(dir) = cwd {
                        executor["cwd"] = json!(absolute(&dir)?);
                    }
                    let task = json!({
                        "resources": {"cpu_millis": cpu_millis, "memory_mb": memory_mb},
                        "queue": queue,
                        "executor": executor,
                    });
                    let mut body = json!({"tasks": vec![task; count.max(1)]});
                    if let Some(user) = user {
                        body["user"] = json!(user);
                    }
                    if let Some(n) = max_attempts {
                        body["retry"] = json!({"max_attempts": n});
                    }
                    body
                }
                (Some(_), false) => bail!("give a job file or a command after --, not both"),
                (None, true) => {
                    bail!("nothing to submit: give a job file, or a command after -- (megha submit -- echo hello)")
                }
            };
            let mut body = body;
            if let Some(name) = name {
                body["name"] = json!(name);
            }
            if !after.is_empty() {
                let mut all = body["after_jobs"].as_array().cloned().unwrap_or_default();
                all.extend(
                    after
                        .into_iter()
                        .map(|(job, when)| json!({"job": job, "when": when})),
                );
                body["after_jobs"] = Value::Array(all);
            }
            if !labels.is_empty() {
                let mut all = body["labels"].as_object().cloned().unwrap_or_default();
                for (k, v) in labels {
                    all.insert(k, json!(v));
                }
                body["labels"] = Value::Object(all);
            }
            let answer = gm.submit(&body, source.as_deref()).await?;
            print(out, &answer, render::submitted(&answer))?;
            let wait = wait.then(|| wait_options.options());
            then_wait(&gm, out, &answer, wait, cli.json).await
        }
        Command::Resubmit {
            job,
            wait,
            wait_options,
        } => {
            let spec = gm.get(&format!("/v1/jobs/{job}/spec")).await?;
            let answer = gm
                .call(reqwest::Method::POST, "/v1/jobs", Some(&spec))
                .await?;
            print(out, &answer, render::submitted(&answer))?;
            let wait = wait.then(|| wait_options.options());
            then_wait(&gm, out, &answer, wait, cli.json).await
        }
        Command::Dev { args } => dev(&args),
        Command::Describe { job } => {
            let value = job_with_tasks(&gm, job).await?;
            let path = format!("/v1/jobs/{job}/spec");
            let answer = gm.send(&reqwest::Method::GET, &path, None).await?;
            let status = answer.status();
            let text = answer.text().await.unwrap_or_default();
            let spec: Result<Value, String> = match serde_json::from_str::<Value>(&text) {
                Ok(spec) if status.is_success() => Ok(spec),
                _ => Err(render::reason(&text)),
            };
            let tasks = value["tasks"].as_array().cloned().unwrap_or_default();
            let all = json!({"job": value["job"], "spec": spec.as_ref().ok(), "tasks": tasks});
            let text =
                describe::describe(&value["job"], spec.as_ref().map_err(String::as_str), &tasks);
            done(print(out, &all, text))
        }
        Command::Wait { jobs, wait_options } => {
            Ok(wait::wait(&gm, &jobs, wait_options.options(), cli.json).await)
        }
        Command::Status {
            job: Some(id),
            exit_code,
            ..
        } => {
            if exit_code {
                let path = format!("/v1/jobs/{id}");
                let answer = gm.send(&reqwest::Method::GET, &path, None).await?;
                if answer.status() == reqwest::StatusCode::NOT_FOUND {
                    let text = answer.text().await.unwrap_or_default();
                    eprintln!(
                        "megha: job {id} is unknown (never submitted to this GM, another user's, or ended and forgotten): {}",
                        render::reason(&text)
                    );
                    return Ok(outcome::UNKNOWN_JOB);
                }
            }
            let value = job_with_tasks(&gm, id).await?;
            let tasks = value["tasks"].as_array().cloned().unwrap_or_default();
            print(out, &value, render::job(&value["job"], &tasks))?;
            if !exit_code {
                return Ok(0);
            }
            let o = outcome::Outcome::of(&value["job"])
                .with_context(|| format!("job {id}: no known state in {}", value["job"]))?;
            Ok(o.exit_code())
        }
        Command::Job { id } => {
            let value = job_with_tasks(&gm, id).await?;
            let tasks = value["tasks"].as_array().cloned().unwrap_or_default();
            done(print(out, &value, render::job(&value["job"], &tasks)))
        }
        Command::Status {
            job: None,
            state,
            queue,
            user,
            limit,
            after,
            oldest,
            name,
            label,
            exit_code: _,
            all_gms,
        } => {
            let mut query = vec![format!("limit={limit}")];
            if oldest {
                query.push("order=oldest".to_owned());
            }
            if !all_gms {
                query.push("all_gms=false".to_owned());
            }
            for (k, v) in [
                ("state", state),
                ("queue", queue),
                ("user", user),
                ("name", name),
                ("label", label),
            ] {
                if let Some(v) = v {
                    query.push(format!("{k}={}", encode(&v)));
                }
            }
            if let Some(after) = after {
                query.push(format!("after={after}"));
            }
            let page = gm.get(&format!("/v1/jobs?{}", query.join("&"))).await?;
            done(print(out, &page, render::jobs(&page)))
        }
        Command::Pending { limit } => {
            let list = gm.get(&format!("/v1/pending?limit={limit}")).await?;
            done(print(out, &list, render::pending(&list)))
        }
        Command::Top {
            interval,
            once,
            jobs,
            stale_ms,
        } => loop {
            let summary = top_summary(&gm, jobs, stale_ms).await?;
            if !once && !cli.json {
                // Clear the screen, cursor home.
                write!(out, "\x1b[2J\x1b[H")?;
            }
            print(out, &summary, render::top(&summary))?;
            out.flush()?;
            if once {
                return Ok(0);
            }
            tokio::time::sleep(std::time::Duration::from_secs_f64(interval)).await;
        },
        Command::Cancel { id } => {
            let path = format!("/v1/jobs/{id}");
            // Ended before this cancel: said so (the answer is the same 202).
            let before = gm.get(&path).await.ok();
            let job = gm.call(reqwest::Method::DELETE, &path, None).await?;
            let ended = before.is_some_and(|b| b["state"] != "active");
            done(print(out, &job, render::cancelled(&job, ended)))
        }
        Command::Logs(which) => {
            logs::print(&gm, &which, out).await?;
            Ok(0)
        }
        Command::Nodes { summary } => {
            let view = gm.get(&format!("/v1/nodes?summary={summary}")).await?;
            let marks = health::Marks::of(cluster(&gm).await.as_ref());
            done(print(out, &view, render::nodes(&view, &marks)))
        }
        Command::Node { action } => {
            let (method, node) = match action {
                NodeAction::Drain { node } => (reqwest::Method::POST, node),
                NodeAction::Undrain { node } => (reqwest::Method::DELETE, node),
            };
            let (lm, node) = ops::parse_node(&node)?;
            let answer = gm.call(method, &ops::drain_path(lm, node), None).await?;
            done(print(out, &answer, ops::drained(&answer)))
        }
        Command::Usage {
            user,
            queue,
            since,
            until,
        } => {
            let query: Vec<String> = [
                ("user", user),
                ("queue", queue),
                ("since", since),
                ("until", until),
            ]
            .into_iter()
            .filter_map(|(k, v)| Some(format!("{k}={}", encode(&v?))))
            .collect();
            let report = gm.get(&format!("/v1/usage?{}", query.join("&"))).await?;
            done(print(out, &report, ops::usage(&report)))
        }
    }
}

/// `megha dev`: becomes `loadgen dev ARGS` (the program next to this one, else the
/// one on PATH).
fn dev(args: &[String]) -> Result<u8> {
    use std::os::unix::process::CommandExt as _;
    let beside = std::env::current_exe()
        .ok()
        .and_then(|me| Some(me.parent()?.join("loadgen")))
        .filter(|p| p.is_file());
    let program = beside.unwrap_or_else(|| PathBuf::from("loadgen"));
    let error = std::process::Command::new(&program)
        .arg("dev")
        .args(args)
        .exec();
    bail!(
        "megha dev runs `{} dev`, which could not start: {error} (build it: cargo build --release -p loadgen)",
        program.display()
    )
}

/// After a submission's answer was printed: 0, or with `wait` the job's outcome
/// (as `megha wait`).
async fn then_wait(
    gm: &Gm,
    out: &mut dyn Write,
    answer: &Value,
    wait: Option<wait::WaitOptions>,
    json: bool,
) -> Result<u8> {
    let Some(options) = wait else {
        return Ok(0);
    };
    out.flush()?;
    let job = answer["job"]
        .as_u64()
        .with_context(|| format!("no job id in the GM's answer: {answer}"))?;
    Ok(wait::wait(gm, &[job], options, json).await)
}

/// A job and its first 100 tasks, as `{"job": .., "tasks": [..]}`.
async fn job_with_tasks(gm: &Gm, id: u64) -> Result<Value> {
    let job = gm.get(&format!("/v1/jobs/{id}")).await?;
    let n = job["tasks"].as_u64().unwrap_or(0).min(100);
    let mut tasks = Vec::new();
    for index in 0..n {
        tasks.push(gm.get(&format!("/v1/tasks/{id}/{index}")).await?);
    }
    Ok(json!({"job": job, "tasks": tasks}))
}

/// Every job the GM holds (all pages of `GET /v1/jobs`) and its nodes, summarized.
async fn top_summary(gm: &Gm, recent: usize, stale_ms: u64) -> Result<Value> {
    let mut jobs = Vec::new();
    let mut after: Option<u64> = None;
    loop {
        let mut path = "/v1/jobs?limit=1000&order=oldest".to_owned();
        if let Some(a) = after {
            path.push_str(&format!("&after={a}"));
        }
        let page = gm.get(&path).await?;
        jobs.extend(page["jobs"].as_array().cloned().unwrap_or_default());
        match page["next"].as_u64() {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    let nodes = gm.get("/v1/nodes").await?;
    let marks = health::Marks::of(cluster(gm).await.as_ref());
    Ok(top::summarize(&jobs, &nodes, &marks, recent, stale_ms))
}

/// The LMs' own node lists (`GET /v1/cluster`), or `None` (said on stderr) when the
/// GM does not give them: the nodes are then shown without marks.
async fn cluster(gm: &Gm) -> Option<Value> {
    match gm.get("/v1/cluster").await {
        Ok(v) => Some(v),
        Err(e) => {
            eprintln!("megha: down and drained nodes not marked: {e:#}");
            None
        }
    }
}
