//! `GET /v1/tasks/{job}/{index}/logs?stream=stdout|stderr&tail=N&follow=true`: a
//! task's output, from the worker that ran it, through its LM.
//!
//! Proxied rather than redirected (307): workers listen on cluster-internal
//! addresses a user cannot reach, and the GM is the one place where a user's request
//! is checked; the GM names the LM and node from its status record, the LM the
//! worker of that node. `follow=true` streams the log as it grows (the GM reads it
//! from the byte it reached, every [`FOLLOW_POLL`]) and ends once the task ended
//! and everything was read.

use crate::service::actor::GmActor;
use crate::service::observe::status::TaskState;
use actix::prelude::*;
use axum::body::{Body, Bytes};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use common::TaskId;
use std::sync::OnceLock;
use std::time::Duration;

/// How often a followed log is read again.
pub const FOLLOW_POLL: Duration = Duration::from_millis(500);

/// Where a task's log is: its LM's URL and node, and whether the task ended.
#[derive(Debug, Clone)]
pub struct LogSource {
    pub lm_url: String,
    pub node: u32,
    pub ended: bool,
    /// The attempt whose log to read (the worker's current one when `None`).
    pub attempt: Option<u32>,
}

/// Why there is no log to read: (HTTP status, reason).
#[derive(Message, Debug)]
#[rtype(result = "Result<LogSource, (u16, String)>")]
pub struct FindLog {
    pub task: TaskId,
    /// An earlier attempt's log, where that attempt ran (the current one when
    /// `None` or the current attempt).
    pub attempt: Option<u32>,
}

impl Handler<FindLog> for GmActor {
    type Result = Result<LogSource, (u16, String)>;

    fn handle(&mut self, msg: FindLog, _: &mut Context<Self>) -> Self::Result {
        let task = msg.task;
        let Some(status) = self.tracker().task(task) else {
            return Err((404, format!("task {task} is unknown to this GM")));
        };
        let lm_url = |lm: u16| {
            self.lm_urls().get(lm as usize).cloned().ok_or_else(|| {
                (
                    501,
                    "this GM does not know its LMs' URLs (embedded mode): logs are served by the workers only".to_owned(),
                )
            })
        };
        if let Some(n) = msg.attempt.filter(|&n| n != status.attempt) {
            if n == 0 || n > status.attempt {
                return Err((
                    404,
                    format!(
                        "task {task} has no attempt {n}: its attempts are 1 to {}",
                        status.attempt
                    ),
                ));
            }
            let Some((lm, node)) = status
                .failures
                .iter()
                .rev()
                .find(|f| f.attempt == n)
                .and_then(|f| Some((f.lm?, f.node)))
            else {
                return Err((
                    404,
                    format!("the GM does not know where attempt {n} of task {task} ran"),
                ));
            };
            return Ok(LogSource {
                lm_url: lm_url(lm)?,
                node,
                ended: true,
                attempt: Some(n),
            });
        }
        let (Some(lm), Some(node)) = (status.lm, status.node) else {
            return Err((
                409,
                format!(
                    "task {task} has not run yet (state {:?}): no log",
                    status.state
                ),
            ));
        };
        if matches!(status.state, TaskState::Queued | TaskState::Dispatched) {
            return Err((409, format!("task {task} has not started yet: no log")));
        }
        Ok(LogSource {
            lm_url: lm_url(lm)?,
            node,
            ended: status.state.is_final(),
            attempt: msg.attempt,
        })
    }
}

static CLIENT: OnceLock<reqwest::Client> = OnceLock::new();
static SIGNING: OnceLock<Option<service_kit::auth::Signing>> = OnceLock::new();

/// The client of the log reads carries the cluster credential (the LM requires it);
/// call once at start-up, before the first read.
pub fn init_client(
    secret: Option<&service_kit::auth::ClusterSecret>,
    cluster: Option<&common::ClusterName>,
) {
    let _ = CLIENT.set(service_kit::links::http_client_with(
        Duration::from_secs(30),
        secret,
        cluster,
    ));
    let _ = SIGNING.set(service_kit::auth::Signing::new(
        secret,
        service_kit::roles::Role::Lm,
    ));
}

pub(super) fn client() -> &'static reqwest::Client {
    CLIENT.get_or_init(|| service_kit::links::http_client(Duration::from_secs(30)))
}

/// How calls to LMs are signed (as from the GM), when the cluster has per-role
/// credentials.
pub(super) fn signing() -> Option<&'static service_kit::auth::Signing> {
    SIGNING.get().and_then(Option::as_ref)
}

fn text_error(status: u16, error: String) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    (status, axum::Json(serde_json::json!({ "error": error }))).into_response()
}

/// One read of the log at its LM: `tail` lines, or from byte `from`. Returns the
/// status, body and log size (with `from`).
async fn read(
    source: &LogSource,
    task: TaskId,
    stream: &str,
    tail: Option<usize>,
    from: Option<u64>,
) -> Result<(u16, Bytes, Option<u64>), String> {
    let url = format!(
        "{}/v1/tasks/{}/{}/logs",
        source.lm_url.trim_end_matches('/'),
        task.job.0,
        task.index
    );
    let mut params = vec![
        ("node", source.node.to_string()),
        ("stream", stream.to_owned()),
    ];
    if let Some(tail) = tail {
        params.push(("tail", tail.to_string()));
    }
    if let Some(from) = from {
        params.push(("from", from.to_string()));
    }
    if let Some(attempt) = source.attempt {
        params.push(("attempt", attempt.to_string()));
    }
    let answer = service_kit::auth::send(client(), client().get(url).query(&params), signing())
        .await
        .map_err(|e| format!("LM: {e}"))?;
    let status = answer.status().as_u16();
    let size = answer
        .headers()
        .get("x-megha-log-size")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let body = answer.bytes().await.map_err(|e| format!("LM: {e}"))?;
    Ok((status, body, size))
}

/// The answer to a logs request for `task` (found at `source`).
pub async fn serve(
    gm: Addr<GmActor>,
    task: TaskId,
    source: LogSource,
    stream: String,
    tail: Option<usize>,
    follow: bool,
) -> Response {
    if !follow {
        return match read(&source, task, &stream, tail, None).await {
            Ok((200, body, _)) => {
                ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response()
            }
            Ok((status, body, _)) => {
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
                (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
            }
            Err(e) => text_error(502, e),
        };
    }
    // Follow: the tail first (if asked), then every byte after it as it comes.
    let (start, first) = match read(&source, task, &stream, None, Some(u64::MAX)).await {
        Ok((200, _, Some(size))) => {
            let first = match tail {
                Some(n) => match read(&source, task, &stream, Some(n), None).await {
                    Ok((200, body, _)) => body,
                    _ => Bytes::new(),
                },
                None => Bytes::new(),
            };
            (if tail.is_some() { size } else { 0 }, first)
        }
        Ok((status, body, _)) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
            return (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
        }
        Err(e) => return text_error(502, e),
    };
    struct Follow {
        gm: Addr<GmActor>,
        source: LogSource,
        task: TaskId,
        stream: String,
        offset: u64,
        first: Option<Bytes>,
        done: bool,
    }
    let state = Follow {
        gm,
        source,
        task,
        stream,
        offset: start,
        first: (!first.is_empty()).then_some(first),
        done: false,
    };
    let body = futures_util::stream::unfold(state, |mut f| async move {
        if let Some(first) = f.first.take() {
            return Some((Ok::<_, std::io::Error>(first), f));
        }
        loop {
            if f.done {
                return None;
            }
            // Whether the task had ended before this read: then this read is the last.
            let find = FindLog {
                task: f.task,
                attempt: f.source.attempt,
            };
            let ended = match f.gm.send(find).await {
                Ok(Ok(s)) => s.ended,
                _ => true,
            };
            match read(&f.source, f.task, &f.stream, None, Some(f.offset)).await {
                Ok((200, body, _)) if !body.is_empty() => {
                    f.offset += body.len() as u64;
                    return Some((Ok(body), f));
                }
                Ok((200, _, _)) if !ended => tokio::time::sleep(FOLLOW_POLL).await,
                _ => f.done = true,
            }
        }
    });
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        Body::from_stream(body),
    )
        .into_response()
}
