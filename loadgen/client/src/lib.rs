//! `megha`, the command-line client: submit jobs, list them, follow one, cancel it,
//! read a task's output and look at the nodes, against a global master's public API.
//! Human tables by default, `--json` for scripts. Its own crate (package `megha-client`,
//! binary `megha`, built as `target/<profile>/megha`), so that a newcomer looking for the
//! client finds it, and the client links no scheduler code.
//!
//! Layout:
//! - this file: the arguments ([`Cli`]) and the commands; `src/main.rs`: the binary;
//! - [`render`]: the tables (pure, unit-tested);
//! - [`top`]: the summary of `megha top` (pure, unit-tested);
//! - [`health`]: down and drained nodes, LMs not ready, from the LMs' own lists;
//! - [`ops`]: `megha node drain|undrain` and `megha usage` (pure parts);
//! - [`outcome`]: a job's outcome as an exit status (pure, unit-tested);
//! - [`wait`]: `megha wait` and `megha run --wait` (polling the GM);
//! - [`logs`]: `megha logs` (waiting for a task that has not started, following);
//! - `flags`: the values of flags and job files (pure, unit-tested).

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
use clap::{Parser, Subcommand};
use serde_json::{json, Value};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use flags::{absolute, after_job, encode, key_value, positive_seconds, read_job_file};

#[derive(Debug, Parser)]
#[command(
    name = "megha",
    version,
    about = "Command-line client of a Megha cluster: submit jobs, follow them, cancel them, read their output, see the nodes.",
    long_about = "Command-line client of a Megha cluster. It talks to one global master (GM) over its \
public HTTP API: --gm URL, or the MEGHA_GM environment variable (default http://127.0.0.1:8080). \
A GM with a standby has two addresses, --gm 'URL|URL': the first that serves answers.",
    after_help = "Examples:
  megha run -- sh -c 'echo hello'             one task running a command
  megha run --count 4 --max-attempts 3 -- ./train.sh
  megha run job.json                          a job file (the POST /v1/jobs body; .toml too)
  megha run --wait -- make test               submit, wait, exit with the job's outcome
  megha wait 281474976710657                  exit 0, the task's exit code, 130 cancelled...
  megha status --state active                 the GM's jobs
  megha status 281474976710657                one job and its tasks
  megha pending                               queued tasks and why each waits
  megha logs 281474976710657 0 --follow       a task's output as it grows
  megha cancel 281474976710657
  megha nodes                                 nodes; down, drained, LMs not ready marked
  megha node drain lm0/node3                  no new work there (admin); undrain: back
  megha usage --user alice --since 7d         runs, CPU and memory reserved per queue
  megha top                                   a live summary (Ctrl-C to quit); --once for scripts"
)]
pub struct Cli {
    /// The global master's base URL; `URL|URL` for a GM and its standby (the
    /// first that serves answers).
    #[arg(
        long,
        env = "MEGHA_GM",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    pub gm: String,
    /// File holding your API token (or the token itself in MEGHA_TOKEN); see the
    /// README's "Security".
    #[arg(long, env = "MEGHA_TOKEN_FILE", value_name = "FILE", global = true)]
    pub token_file: Option<PathBuf>,
    /// A CA (PEM) to trust for an https:// GM, besides the system roots.
    #[arg(long, env = "MEGHA_TLS_CA_FILE", value_name = "FILE", global = true)]
    pub tls_ca_file: Option<PathBuf>,
    /// Print the GM's JSON answers instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Submit a job: a job file (JSON or TOML, the body of POST /v1/jobs), or a
    /// command after `--` run by `--count` tasks.
    #[command(visible_alias = "submit", after_help = EXIT_CODES)]
    Run {
        /// A job file (.json or .toml). Leave out to give a command after `--`.
        file: Option<PathBuf>,
        /// Tasks running the command.
        #[arg(long, default_value_t = 1)]
        count: usize,
        /// CPU per task, in thousandths of a core.
        #[arg(long, default_value_t = 1000)]
        cpu_millis: u64,
        /// Memory per task, in MiB.
        #[arg(long, default_value_t = 256)]
        memory_mb: u64,
        /// The user queue (when the cluster has queues).
        #[arg(long)]
        queue: Option<String>,
        /// Runs of a failed task at most, the first included (1: no retry).
        #[arg(long)]
        max_attempts: Option<u32>,
        /// Submit as this user (an admin only). Left out, the GM records the
        /// token's user (with no tokens file: no user).
        #[arg(long)]
        user: Option<String>,
        /// The tasks' working directory (at the worker); a relative path is taken
        /// from the current directory. Left out: a fresh directory of the task's own.
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// A variable of the tasks' environment (repeatable); see docs/cli.md for
        /// the MEGHA_* variables every task gets.
        #[arg(long = "env", value_name = "K=V", value_parser = key_value)]
        env: Vec<(String, String)>,
        /// The job's name (1 to 128 bytes; names need not be unique).
        #[arg(long)]
        name: Option<String>,
        /// A label of the job (repeatable): `megha status --label K=V` finds it.
        #[arg(long = "label", value_name = "K=V", value_parser = key_value)]
        labels: Vec<(String, String)>,
        /// Run after job JOB (repeatable): `JOB` or `JOB:ok` once it finished,
        /// `JOB:any` once it ended, `JOB:failed` once it failed or was cancelled
        /// (Slurm's afterok, afterany, afternotok); a job of any GM. When JOB
        /// ends otherwise, this job fails without running.
        #[arg(long = "after", value_name = "JOB[:WHEN]", value_parser = after_job)]
        after: Vec<(u64, String)>,
        /// Wait for the job to end and exit with its outcome (as `megha wait`).
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        wait_options: WaitArgs,
        /// The command and its arguments.
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// Submit JOB again, as a new job: the spec it was submitted with
    /// (GET /v1/jobs/{id}/spec), e.g. after it failed.
    #[command(after_help = EXIT_CODES)]
    Resubmit {
        job: u64,
        /// Wait for the new job to end and exit with its outcome (as `megha wait`).
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        wait_options: WaitArgs,
    },
    /// A whole cluster on this machine for trying things, until Ctrl-C: runs
    /// `loadgen dev` (next to this program, or on PATH) with these arguments
    /// (`megha dev -- --help` lists them); then `megha run --wait -- echo hello`.
    Dev {
        /// Arguments for `loadgen dev` (e.g. `-- --nodes 4`).
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// One job in full: its state, its spec as submitted, each task's timeline
    /// (submitted, launched where, started, failed runs, ended how) and its
    /// failures (the first 100 tasks).
    Describe { job: u64 },
    /// Wait until every JOB ended; exit with their outcome (the first JOB, in the
    /// order given, that did not finish decides).
    #[command(after_help = EXIT_CODES)]
    Wait {
        #[arg(required = true)]
        jobs: Vec<u64>,
        #[command(flatten)]
        wait_options: WaitArgs,
    },
    /// The GM's jobs, newest first (--oldest: oldest first); with a JOB id, that
    /// job and its tasks (the first 100: state, run, where, why).
    #[command(visible_alias = "jobs", after_help = EXIT_CODES)]
    Status {
        /// One job's id (leave out to list jobs).
        job: Option<u64>,
        /// Only jobs in this state: active, finished, failed or cancelled.
        #[arg(long)]
        state: Option<String>,
        #[arg(long)]
        queue: Option<String>,
        #[arg(long)]
        user: Option<String>,
        /// Jobs per page (at most 1000).
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// The page after this job id (the `next` of the previous page).
        #[arg(long)]
        after: Option<u64>,
        /// Oldest jobs first.
        #[arg(long)]
        oldest: bool,
        /// Only jobs of this name.
        #[arg(long)]
        name: Option<String>,
        /// Only jobs with this label.
        #[arg(long, value_name = "K=V")]
        label: Option<String>,
        /// With a JOB: exit with its outcome, as `megha wait` would, without
        /// waiting (124 while it has not ended).
        #[arg(long, requires = "job")]
        exit_code: bool,
        /// Every GM's jobs (the default: the GM asks the others and merges their
        /// lists), or `--all-gms=false` for the jobs of the GM at --gm only.
        #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
        all_gms: bool,
    },
    /// One job, with its tasks (the same as `status JOB`).
    #[command(hide = true)]
    Job { id: u64 },
    /// Queued tasks, longest waiting first, and why each is not running.
    Pending {
        /// Tasks to show (at most 10,000); the total is always given.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// A live summary: per queue running, starting and pending tasks; per LM its
    /// nodes idle, busy and full; the newest jobs. Refreshes until Ctrl-C.
    Top {
        /// Seconds between refreshes.
        #[arg(long, default_value_t = 2.0, value_parser = positive_seconds)]
        interval: f64,
        /// Print once and exit (for scripts and tests).
        #[arg(long)]
        once: bool,
        /// How many of the newest jobs to list.
        #[arg(long, default_value_t = 10)]
        jobs: usize,
        /// An LM state older than this (milliseconds) is shown `stale`.
        #[arg(long, default_value_t = 30_000)]
        stale_ms: u64,
    },
    /// Cancel a job: its queued tasks leave the queues, its running ones are killed.
    Cancel { id: u64 },
    /// A task's output (stdout unless --stderr).
    Logs(logs::Which),
    /// The nodes as the GM sees them (per local master and partition), each marked
    /// down, drained, or on an LM that is not ready, as the LMs' own lists say.
    Nodes {
        /// Totals per partition only.
        #[arg(long)]
        summary: bool,
    },
    /// Take a node out of service and back (an admin only).
    Node {
        #[command(subcommand)]
        action: NodeAction,
    },
    /// Runs, wall time and CPU and memory reserved (x run time), per user and queue
    /// (yours only, unless you are an admin).
    Usage {
        /// One user's (an admin may name anyone; others only themselves).
        #[arg(long)]
        user: Option<String>,
        #[arg(long)]
        queue: Option<String>,
        /// From: Unix seconds, or a time ago (90m, 12h, 7d, 2w). Left out: all kept.
        #[arg(long)]
        since: Option<String>,
        /// Until (the same forms). Left out: now.
        #[arg(long)]
        until: Option<String>,
    },
}

/// `megha node ...`.
#[derive(Debug, Subcommand)]
pub enum NodeAction {
    /// No new work lands on NODE (LM/NODE, like lm0/node3); what runs there
    /// finishes (like `scontrol update state=drain`, `nomad node drain`).
    Drain { node: String },
    /// NODE takes work again.
    Undrain { node: String },
}

/// The exit statuses of `wait`, `run --wait` and `status --exit-code` (as
/// docs/cli.md; the values are [`outcome`]'s).
const EXIT_CODES: &str = "Exit status (of wait, run --wait, status JOB --exit-code; docs/cli.md):
  0        every task finished
  1-255    the exit code of the job's first failed task (lowest index), when it exited
  128+N    that task was killed by signal N (137: SIGKILL, out-of-memory kills too)
  125      that task failed without an exit code: lost, could not start, unplaceable
  130      the job was cancelled
  124      not ended yet (status --exit-code), or --timeout ran out
  127      unknown job: never submitted to this GM, another user's, or forgotten
  1        megha's own error (GM unreachable past --give-up-after, refused call)
  2        bad arguments
A task's own exit code can equal one of these; --json tells them apart.";

/// How `wait` and `run --wait` poll.
#[derive(Debug, Clone, clap::Args)]
pub struct WaitArgs {
    /// The longest delay between two polls of a job, in seconds.
    #[arg(long = "poll-interval", default_value_t = 2.0, value_parser = positive_seconds)]
    poll_interval: f64,
    /// Stop waiting after this many seconds (exit 124).
    #[arg(long, value_parser = positive_seconds)]
    timeout: Option<f64>,
    /// Give up (exit 1) when the GM did not answer for this many seconds in a row.
    #[arg(long, default_value_t = 60.0, value_parser = positive_seconds)]
    give_up_after: f64,
}

impl WaitArgs {
    fn options(&self) -> wait::WaitOptions {
        wait::WaitOptions {
            interval: std::time::Duration::from_secs_f64(self.poll_interval),
            timeout: self.timeout.map(std::time::Duration::from_secs_f64),
            give_up_after: std::time::Duration::from_secs_f64(self.give_up_after),
        }
    }
}

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
