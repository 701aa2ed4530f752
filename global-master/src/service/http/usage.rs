//! `GET /v1/usage?user=&queue=&since=&until=`: the accounting (see
//! [`crate::service::observe::usage`]): per user and queue, the runs that ended in
//! the range, their wall time and the CPU and memory they reserved.
//!
//! `since` and `until` are Unix seconds, or a time ago (`90m`, `12h`, `7d`, `2w`);
//! left out: everything kept. A user sees their own usage only: without `user`,
//! theirs; another user's is 403 naming `user`. An admin sees every user's, or
//! one's.

use super::answers::Refusal;
use super::state::{caller_of, error, query_of, unavailable, ApiState};
use crate::service::actor::usage::GetUsage;
use crate::service::admission::api::ApiError;
use crate::service::admission::users::Caller;
use crate::service::observe::usage::{UsageLine, UsageQuery, BUCKET_SECONDS, USED_MEASURED};
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};

#[derive(serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(crate) struct UsageParams {
    /// One user's usage (a non-admin: their own only; left out: theirs).
    user: Option<String>,
    /// One queue's usage.
    queue: Option<String>,
    /// From (Unix seconds, or a time ago: `90m`, `12h`, `7d`, `2w`).
    since: Option<String>,
    /// Until (the same forms); left out: now.
    until: Option<String>,
    /// Every GM's usage summed (the default, when this GM knows the cluster's
    /// GMs), or `false` for the jobs of this GM only.
    all_gms: Option<bool>,
}

/// The answer: per (user, queue) in the range, and their sum.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct UsageReport {
    /// The range asked for, Unix seconds (`until` excluded).
    pub since: u64,
    pub until: u64,
    /// Runs are booked in the hour they ended in: an hour counts when it starts
    /// in the range.
    pub resolution_seconds: u64,
    /// Resources used (as opposed to reserved): not reported by the workers.
    pub used: String,
    pub lines: Vec<UsageLine>,
    pub total: UsageLine,
    /// The GMs that did not answer (their jobs' usage is missing from the sums).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    #[schema(value_type = Vec<super::cluster_jobs::Unreachable>)]
    pub unreachable: Vec<super::cluster_jobs::Unreachable>,
}

#[utoipa::path(get, path = "/v1/usage", tag = "scheduler",
    params(UsageParams),
    responses(
        (status = 200, description = "Per user and queue: runs ended, wall time, CPU and memory reserved x run time", body = UsageReport),
        (status = 400, description = "A bad query parameter (named)", body = Refusal),
        (status = 401, description = "No, or an unknown, bearer token", body = Refusal),
        (status = 403, description = "A non-admin asked for another user's usage (`user`)", body = Refusal),
    ))]
pub(crate) async fn serve(
    State(s): State<ApiState>,
    headers: axum::http::HeaderMap,
    caller: Option<Extension<Caller>>,
    query: Result<Query<UsageParams>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let caller = caller_of(caller);
    let now = service_kit::clock::now().0 / 1_000_000;
    let params = match query_of(query) {
        Ok(p) => p,
        Err(e) => return error(e),
    };
    // A GM asked by another answers for its own jobs only (no fan-out loops).
    let fan_out = params.all_gms.unwrap_or(true)
        && !headers.contains_key(crate::service::admission::route::FORWARDED_BY);
    let q = match usage_query(params, &caller, now) {
        Ok(q) => q,
        Err(e) => return error(e),
    };
    let (since, until) = (q.since, q.until);
    let others = match s.route.as_deref() {
        Some(r) if fan_out && r.gms().len() > 1 => Some((r, peer_query(&q))),
        _ => None,
    };
    let (mut lines, mut total) = match s.gm.send(GetUsage(q)).await {
        Ok(answer) => answer,
        Err(e) => return unavailable(&e.to_string()),
    };
    let mut unreachable = Vec::new();
    if let Some((route, query)) = others {
        let path = format!("/v1/usage?all_gms=false&{query}");
        let asks = route
            .gms()
            .into_iter()
            .filter(|g| *g != route.me)
            .map(|gm| {
                let path = &path;
                let headers = &headers;
                async move {
                    (
                        gm,
                        crate::service::admission::route::get_json(route, gm, headers, path).await,
                    )
                }
            });
        for (gm, answer) in futures_util::future::join_all(asks).await {
            let report = answer.map_err(|e| e.error).and_then(|v| {
                serde_json::from_value::<PeerReport>(v)
                    .map_err(|e| format!("not a usage answer: {e}"))
            });
            match report {
                Ok(report) => {
                    for line in report.lines {
                        add_line(&mut lines, line);
                    }
                    sum(&mut total, &report.total);
                }
                Err(error) => {
                    tracing::warn!(other = %gm, %error, "usage: a GM did not answer");
                    unreachable.push(super::cluster_jobs::Unreachable { gm: gm.0, error });
                }
            }
        }
    }
    Json(UsageReport {
        since,
        until,
        resolution_seconds: BUCKET_SECONDS,
        used: USED_MEASURED.to_owned(),
        total,
        lines,
        unreachable,
    })
    .into_response()
}

/// What this GM reads of another GM's answer.
#[derive(serde::Deserialize)]
struct PeerReport {
    lines: Vec<UsageLine>,
    total: UsageLine,
}

fn sum(into: &mut UsageLine, other: &UsageLine) {
    into.runs += other.runs;
    into.wall_seconds += other.wall_seconds;
    into.cpu_seconds_reserved += other.cpu_seconds_reserved;
    into.memory_mb_seconds_reserved += other.memory_mb_seconds_reserved;
    into.runs_measured += other.runs_measured;
    into.cpu_seconds_used += other.cpu_seconds_used;
    into.memory_peak_mb = into.memory_peak_mb.max(other.memory_peak_mb);
}

/// Adds `line` to the line of its (user, queue), or as a new one (in order).
fn add_line(lines: &mut Vec<UsageLine>, line: UsageLine) {
    match lines
        .iter_mut()
        .find(|l| l.user == line.user && l.queue == line.queue)
    {
        Some(l) => sum(l, &line),
        None => {
            let at = lines.partition_point(|l| (&l.user, &l.queue) < (&line.user, &line.queue));
            lines.insert(at, line);
        }
    }
}

/// `q` as another GM's query string (absolute times: every GM the same range).
fn peer_query(q: &UsageQuery) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    out.append_pair("since", &q.since.to_string());
    if q.until != u64::MAX {
        out.append_pair("until", &q.until.to_string());
    }
    if let Some(user) = &q.user {
        out.append_pair("user", user);
    }
    if let Some(queue) = &q.queue {
        out.append_pair("queue", queue);
    }
    out.finish()
}

/// The query for `caller` at `now` (Unix seconds), or the 4xx naming the field.
fn usage_query(p: UsageParams, caller: &Caller, now: u64) -> Result<UsageQuery, ApiError> {
    let user = match (p.user, caller.admin) {
        (Some(u), false) if u != *caller.user => {
            return Err(ApiError::new(
                403,
                "user",
                format!("{} may see their own usage only, not {u}'s", caller.user),
            ))
        }
        (None, false) => Some(caller.user.to_string()),
        (user, _) => user,
    };
    let since = match p.since {
        Some(t) => time_of("since", &t, now)?,
        None => 0,
    };
    let until = match p.until {
        Some(t) => time_of("until", &t, now)?,
        None => u64::MAX,
    };
    if since > until {
        return Err(ApiError::new(
            400,
            "since",
            format!("since ({since}) is after until ({until})"),
        ));
    }
    Ok(UsageQuery {
        user,
        queue: p.queue,
        since,
        until,
    })
}

/// Unix seconds, or a time ago before `now` (`90m`, `12h`, `7d`, `2w`).
pub fn time_of(field: &str, text: &str, now: u64) -> Result<u64, ApiError> {
    let bad = || {
        ApiError::new(
            400,
            field,
            format!(
                "{field}: {text:?} is neither Unix seconds nor a time ago like 90m, 12h, 7d or 2w"
            ),
        )
    };
    if let Ok(t) = text.parse::<u64>() {
        return Ok(t);
    }
    // The unit is the last character (not byte: the text may be any UTF-8).
    let split = text.char_indices().last().map_or(0, |(i, _)| i);
    let (n, unit) = text.split_at(split);
    let n: u64 = n.parse().map_err(|_| bad())?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(bad()),
    };
    Ok(now.saturating_sub(n.saturating_mul(seconds)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(user: &str, admin: bool) -> Caller {
        let mut c = Caller::anonymous();
        c.user = user.into();
        c.admin = admin;
        c
    }

    fn params(user: Option<&str>, since: Option<&str>, until: Option<&str>) -> UsageParams {
        UsageParams {
            user: user.map(str::to_owned),
            queue: None,
            since: since.map(str::to_owned),
            until: until.map(str::to_owned),
            all_gms: None,
        }
    }

    #[test]
    fn users_see_their_own_usage_admins_anyones() {
        let alice = caller("alice", false);
        let q = usage_query(params(None, None, None), &alice, 1000).unwrap();
        assert_eq!(q.user.as_deref(), Some("alice"));
        assert_eq!((q.since, q.until), (0, u64::MAX));
        let q = usage_query(params(Some("alice"), None, None), &alice, 1000).unwrap();
        assert_eq!(q.user.as_deref(), Some("alice"));
        let e = usage_query(params(Some("bob"), None, None), &alice, 1000).unwrap_err();
        assert_eq!((e.status, e.field.as_str()), (403, "user"));
        let admin = caller("root", true);
        let q = usage_query(params(None, None, None), &admin, 1000).unwrap();
        assert_eq!(q.user, None);
        let q = usage_query(params(Some("bob"), None, None), &admin, 1000).unwrap();
        assert_eq!(q.user.as_deref(), Some("bob"));
    }

    #[test]
    fn times_are_unix_seconds_or_a_time_ago_and_bad_ones_name_their_field() {
        let now = 10 * 86_400;
        assert_eq!(time_of("since", "12345", now).unwrap(), 12345);
        assert_eq!(time_of("since", "7d", now).unwrap(), 3 * 86_400);
        assert_eq!(time_of("since", "2h", now).unwrap(), now - 7200);
        assert_eq!(time_of("since", "1w", now).unwrap(), 3 * 86_400);
        assert_eq!(time_of("since", "99w", now).unwrap(), 0);
        for bad in ["", "d", "7y", "-3", "seven days", "ZÏ", "7Ï", "Ï"] {
            let e = time_of("until", bad, now).unwrap_err();
            assert_eq!((e.status, e.field.as_str()), (400, "until"), "{bad}");
        }
        let admin = caller("root", true);
        let e = usage_query(params(None, Some("100"), Some("50")), &admin, 1000).unwrap_err();
        assert_eq!((e.status, e.field.as_str()), (400, "since"));
    }
}
