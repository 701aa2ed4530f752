//! `loadgen dev` (also `megha dev`): a whole cluster in this process for trying
//! things in one command, Nomad's `agent -dev`: one GM, one LM and one worker with
//! exec tasks, linked in memory (the embedded mode: no RabbitMQ), the GM's real HTTP
//! API and dashboard on one loopback port, open (no tokens), until Ctrl-C. `megha`'s
//! default URL is this port's default. Task logs are read from the worker's
//! directory (the embedded GM has no LM URL to fetch them through).

use crate::replay::embedded::{self, EmbeddedConfig};
use anyhow::{bail, Context, Result};
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use common::cluster::ClusterSpec;
use common::{GmId, JobId, Micros, Resources, TaskId};
use global_master::service::actor::queries::GetTask;
use global_master::service::actor::GmActor;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use worker::exec::logs::Stream;

#[derive(clap::Args, Debug)]
pub struct DevArgs {
    /// Where the API, the dashboard and `megha` reach the cluster (loopback only:
    /// the dev cluster has no tokens).
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR:PORT")]
    pub listen: String,
    /// Nodes of the cluster.
    #[arg(long, default_value_t = 2)]
    pub nodes: usize,
    /// Cores per node.
    #[arg(long, default_value_t = 2)]
    pub node_cpus: u64,
    /// Memory per node, in MiB.
    #[arg(long, default_value_t = 4096)]
    pub node_memory_mb: u64,
    /// Where the worker keeps task directories and logs (created, must not exist;
    /// default: a new directory under the system's temporary directory, removed at
    /// exit).
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Run each task as a uid of FIRST-LAST (no account needs them), as a worker
    /// run by root must; default when run as root: 3300000-3300999. Not root: tasks
    /// run as you.
    #[arg(long, value_name = "FIRST-LAST")]
    pub task_uids: Option<String>,
}

/// The uids tasks run as when `loadgen dev` runs as root and names none.
const ROOT_TASK_UIDS: &str = "3300000-3300999";

/// How often a followed log is read again.
const FOLLOW_POLL: Duration = Duration::from_millis(200);

pub fn run(args: DevArgs) -> Result<()> {
    service_kit::logging::init(service_kit::logging::LogFormat::Text);
    service_kit::auth::open_mode_allowed(
        "tokens file",
        "nothing: `dev` is for loopback",
        &args.listen,
    )?;
    if args.nodes == 0 || args.node_cpus == 0 || args.node_memory_mb == 0 {
        bail!("--nodes, --node-cpus and --node-memory-mb must be positive");
    }
    let root = worker::exec::identity::is_root();
    let task_uids = match (&args.task_uids, root) {
        (Some(range), _) => Some(range.as_str()),
        (None, true) => Some(ROOT_TASK_UIDS),
        (None, false) => None,
    }
    .map(worker::exec::identity::IdentityConfig::parse_range)
    .transpose()
    .map_err(|e| anyhow::anyhow!("--task-uids: {e}"))?;
    let (data_dir, temporary) = match &args.data_dir {
        Some(dir) => (dir.clone(), false),
        None => (
            std::env::temp_dir().join(format!("megha-dev-{}", std::process::id())),
            true,
        ),
    };
    // A directory of its own, never one planted before (see docs/security.md).
    std::fs::create_dir(&data_dir).with_context(|| {
        format!(
            "--data-dir {}: cannot create it (it must not exist)",
            data_dir.display()
        )
    })?;
    let cfg = EmbeddedConfig {
        cluster: ClusterSpec::generate(
            1,
            1,
            args.nodes,
            Resources::cores(args.node_cpus, args.node_memory_mb),
            0,
        ),
        workers_per_lm: 1,
        heartbeat: Micros::from_millis(500),
        publish_min_interval: Duration::from_millis(50),
        batch_size: 64,
        max_queued: 100_000,
        fairness: None,
        mercury: None,
        designated_gm: GmId(0),
        exec: Some(worker::exec::ExecSettings {
            identity: worker::exec::identity::IdentityConfig {
                task_uids,
                task_user: None,
                allow_run_as_self: task_uids.is_none(),
            },
            ..worker::exec::ExecSettings::as_self(data_dir.clone())
        }),
    };
    let served = super::replay::in_actix_system(serve(cfg, &args, data_dir.clone()));
    if temporary {
        let _ = std::fs::remove_dir_all(&data_dir);
    }
    served
}

async fn serve(cfg: EmbeddedConfig, args: &DevArgs, data_dir: PathBuf) -> Result<()> {
    let cluster = embedded::start(&cfg, Arc::new(|_| {}))
        .await
        .context("cannot start the cluster")?;
    let gm = cluster.gms[0].clone();
    let api = global_master::service::http::router(embedded::http::api_state(&cluster, 0, None));
    let logs = Router::new()
        .route(
            "/v1/tasks/{job}/{index}/logs",
            axum::routing::get(task_logs),
        )
        .with_state(Logs {
            gm: gm.clone(),
            data_dir: data_dir.clone(),
        });
    let app = logs.fallback_service(api);
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("--listen {}: cannot bind", args.listen))?;
    let url = format!("http://{}", listener.local_addr()?);
    println!(
        "megha dev: 1 GM, 1 LM, 1 worker, {} nodes of {} cores and {} MiB, exec tasks, no tokens\n\
         API and dashboard: {url}/   (megha's default; else export MEGHA_GM={url})\n\
         try: megha run --wait -- echo hello\n\
         task directories and logs: {}\n\
         Ctrl-C stops it",
        args.nodes,
        args.node_cpus,
        args.node_memory_mb,
        data_dir.display()
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("serving the API")?;
    eprintln!("megha dev: stopped");
    Ok(())
}

#[derive(Clone)]
struct Logs {
    gm: actix::Addr<GmActor>,
    data_dir: PathBuf,
}

#[derive(serde::Deserialize)]
struct LogsQuery {
    stream: Option<String>,
    tail: Option<usize>,
    follow: Option<bool>,
    attempt: Option<u32>,
}

fn refuse(status: StatusCode, field: Option<&str>, error: String) -> Response {
    let body = match field {
        Some(f) => serde_json::json!({"field": f, "error": error}),
        None => serde_json::json!({"error": error}),
    };
    (status, axum::Json(body)).into_response()
}

/// `GET /v1/tasks/{job}/{index}/logs?stream=&tail=&follow=`, as the GM answers it,
/// from the worker's directory.
async fn task_logs(
    State(s): State<Logs>,
    Path((job, index)): Path<(String, String)>,
    query: Result<Query<LogsQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    use global_master::service::admission::api::parse_id;
    let (job, index): (u64, u32) = match (parse_id("job", &job), parse_id("index", &index)) {
        (Ok(j), Ok(i)) => (j, i),
        (Err(e), _) | (_, Err(e)) => {
            return refuse(StatusCode::BAD_REQUEST, Some(&e.field), e.error)
        }
    };
    let q = match query {
        Ok(Query(q)) => q,
        Err(e) => return refuse(StatusCode::BAD_REQUEST, Some("query"), e.body_text()),
    };
    let stream = match q.stream.as_deref().unwrap_or("stdout") {
        "stdout" => Stream::Stdout,
        "stderr" => Stream::Stderr,
        _ => {
            return refuse(
                StatusCode::BAD_REQUEST,
                Some("stream"),
                "use stdout or stderr".into(),
            )
        }
    };
    let task = TaskId {
        job: JobId(job),
        index,
    };
    let Ok(Some(status)) = s.gm.send(GetTask(task)).await else {
        return refuse(
            StatusCode::NOT_FOUND,
            None,
            format!("task {task} is unknown to this GM"),
        );
    };
    let read = {
        let dir = s.data_dir.clone();
        let attempt = q.attempt;
        move || embedded::task_log(&dir, task, stream, attempt)
    };
    let Some(text) = read() else {
        let (code, why) = if status.started_at_us.is_none() && !status.state.is_final() {
            (
                StatusCode::CONFLICT,
                format!("task {task} has not started: no log yet"),
            )
        } else {
            (
                StatusCode::NOT_FOUND,
                format!("task {task} left no log at its worker"),
            )
        };
        return refuse(code, None, why);
    };
    let first = match q.tail {
        Some(n) => {
            let lines: Vec<&str> = text.split_inclusive('\n').collect();
            lines[lines.len().saturating_sub(n)..].concat()
        }
        None => text.clone(),
    };
    if !q.follow.unwrap_or(false) {
        return ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], first).into_response();
    }
    // Follow: what is there, then what the task adds, until it ended.
    let gm = s.gm.clone();
    let state = (Some(first), text.len(), false);
    let body = futures_util::stream::unfold(state, move |(first, mut offset, done)| {
        let (gm, read) = (gm.clone(), read.clone());
        async move {
            if let Some(first) = first.filter(|f| !f.is_empty()) {
                return Some((Ok::<_, std::io::Error>(first), (None, offset, done)));
            }
            loop {
                if done {
                    return None;
                }
                let ended = match gm.send(GetTask(task)).await {
                    Ok(Some(t)) => t.state.is_final(),
                    _ => true,
                };
                let text = read().unwrap_or_default();
                if let Some(more) = text.get(offset..).filter(|m| !m.is_empty()) {
                    let more = more.to_owned();
                    offset = text.len();
                    return Some((Ok(more), (None, offset, ended)));
                }
                if ended {
                    return None;
                }
                tokio::time::sleep(FOLLOW_POLL).await;
            }
        }
    });
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        Body::from_stream(body),
    )
        .into_response()
}
