//! `GET /v1/jobs` over the whole cluster: every GM's jobs, merged in one order and
//! paged consistently (the default when this GM knows the cluster's GMs; a GM asked
//! by another lists its own only).
//!
//! Job ids order jobs by submission across GMs: below the GM number (top 16 bits)
//! an id holds its submission time in microseconds, raised to stay unique per GM
//! ([`common::JobId::stamped`]). The cluster's order is (submission key, GM), newest
//! or oldest first, and `next` is the last job listed, as on one GM: from it each
//! GM's own place in that order follows ([`after_at`]), so a page never repeats or
//! skips a job however the GMs' pages interleave. A GM that does not answer is named
//! in `unreachable` (the page holds the others' jobs; logged).

use super::state::ApiState;
use crate::service::actor::queries::ListJobs;
use crate::service::admission::route::Route;
use crate::service::observe::status::JobOrder;
use axum::http::HeaderMap;
use common::{GmId, JobId};
use serde_json::Value;

/// One page of the cluster's jobs (see the module doc).
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ClusterJobPage {
    /// Newest first unless `order=oldest`.
    #[schema(value_type = Vec<crate::service::observe::status::JobStatus>)]
    pub jobs: Vec<Value>,
    /// Pass as `after` for the next page; `None` on the last page.
    pub next: Option<u64>,
    /// The GMs that did not answer (their jobs are missing from this page).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unreachable: Vec<Unreachable>,
}

#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct Unreachable {
    pub gm: u16,
    pub error: String,
}

/// The place in the cluster's order of a job id: (submission key, GM).
fn key(job: u64) -> (u64, u16) {
    (JobId(job).submission_key(), JobId(job).accepted_by().0)
}

/// The `after` to ask GM `gm` for, so that it lists exactly its jobs that come
/// after job `cursor` in the cluster's `order` (its own list is by id, which is by
/// submission key within one GM).
pub fn after_at(gm: GmId, cursor: u64, order: JobOrder) -> u64 {
    let (k, cursor_gm) = key(cursor);
    let base = u64::from(gm.0) << JobId::SUBMISSION_BITS;
    match order {
        // Ids below the bound: keys below k, or equal when this GM sorts before.
        JobOrder::Newest => base + k + u64::from(gm.0 < cursor_gm),
        // Ids above the bound: keys above k, or equal when this GM sorts after
        // (then `gm > cursor_gm >= 0`, so `base >= 1 << 48` and nothing wraps).
        JobOrder::Oldest => base + k - u64::from(gm.0 > cursor_gm),
    }
}

/// Merges the GMs' pages (each in `order`) into the cluster's first `limit` jobs;
/// `more` when some GM has jobs beyond its page.
pub fn merge(
    pages: Vec<Vec<Value>>,
    more: bool,
    limit: usize,
    order: JobOrder,
) -> (Vec<Value>, Option<u64>) {
    let mut jobs: Vec<Value> = pages.into_iter().flatten().collect();
    jobs.sort_by_key(|j| key(j["job"].as_u64().unwrap_or(0)));
    if order == JobOrder::Newest {
        jobs.reverse();
    }
    let more = more || jobs.len() > limit;
    jobs.truncate(limit);
    let next = if more {
        jobs.last().and_then(|j| j["job"].as_u64())
    } else {
        None
    };
    (jobs, next)
}

/// The cluster's page: `list` asked of this GM and, with `query` (the same filters
/// as a query string, without `after`), of every other GM that `route` knows.
pub async fn list(
    s: &ApiState,
    route: &Route,
    headers: &HeaderMap,
    list: ListJobs,
    query: &str,
) -> ClusterJobPage {
    let (limit, order, cursor) = (list.limit, list.filter.order, list.after);
    let asks = route.gms().into_iter().map(|gm| {
        let after = cursor.map(|c| after_at(gm, c, order));
        let mine = ListJobs {
            after,
            limit,
            filter: list.filter.clone(),
        };
        async move {
            let answer = if gm == route.me {
                match s.gm.send(mine).await {
                    Ok(page) => serde_json::to_value(page).map_err(|e| e.to_string()),
                    Err(e) => Err(format!("this GM's actor: {e}")),
                }
            } else {
                let after = after.map(|a| format!("&after={a}")).unwrap_or_default();
                let path = format!("/v1/jobs?all_gms=false&{query}{after}");
                crate::service::admission::route::get_json(route, gm, headers, &path)
                    .await
                    .map_err(|e| e.error)
            };
            (gm, answer)
        }
    });
    let answers = futures_util::future::join_all(asks).await;
    let (mut pages, mut more, mut unreachable) = (Vec::new(), false, Vec::new());
    for (gm, answer) in answers {
        match answer {
            Ok(page) => {
                more |= !page["next"].is_null();
                pages.push(page["jobs"].as_array().cloned().unwrap_or_default());
            }
            Err(error) => {
                tracing::warn!(gm = %route.me, other = %gm, %error, "listing jobs: a GM did not answer");
                unreachable.push(Unreachable { gm: gm.0, error });
            }
        }
    }
    let (jobs, next) = merge(pages, more, limit, order);
    ClusterJobPage {
        jobs,
        next,
        unreachable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn id(gm: u16, key: u64) -> u64 {
        (u64::from(gm) << JobId::SUBMISSION_BITS) | key
    }

    /// Every job of three GMs, listed a page at a time from per-GM lists cut at
    /// [`after_at`] and merged: each job exactly once, in the cluster's order,
    /// whatever the page size, newest or oldest first. Equal keys on two GMs too.
    #[test]
    fn pages_over_the_gms_list_every_job_once_in_order() {
        let jobs: Vec<Vec<u64>> = vec![
            vec![id(0, 1), id(0, 5), id(0, 9), id(0, 10)],
            vec![id(1, 2), id(1, 5), id(1, 6)],
            vec![id(2, 0), id(2, 5), id(2, 11), id(2, 12), id(2, 13)],
        ];
        let mut all: Vec<u64> = jobs.iter().flatten().copied().collect();
        all.sort_by_key(|j| key(*j));
        for order in [JobOrder::Newest, JobOrder::Oldest] {
            let expected: Vec<u64> = match order {
                JobOrder::Newest => all.iter().rev().copied().collect(),
                JobOrder::Oldest => all.clone(),
            };
            for limit in 1..=13 {
                let (mut listed, mut cursor) = (Vec::new(), None);
                loop {
                    let mut pages = Vec::new();
                    let mut more = false;
                    for (g, own) in jobs.iter().enumerate() {
                        // One GM's list: its jobs after `after`, by id, `limit` of them.
                        let after = cursor.map(|c| after_at(GmId(g as u16), c, order));
                        let mut mine: Vec<u64> = own
                            .iter()
                            .copied()
                            .filter(|j| match (order, after) {
                                (_, None) => true,
                                (JobOrder::Newest, Some(a)) => *j < a,
                                (JobOrder::Oldest, Some(a)) => *j > a,
                            })
                            .collect();
                        if order == JobOrder::Newest {
                            mine.reverse();
                        }
                        more |= mine.len() > limit;
                        mine.truncate(limit);
                        pages.push(mine.into_iter().map(|j| json!({"job": j})).collect());
                    }
                    let (page, next) = merge(pages, more, limit, order);
                    assert!(page.len() <= limit);
                    listed.extend(page.iter().map(|j| j["job"].as_u64().expect("id")));
                    match next {
                        Some(n) => cursor = Some(n),
                        None => break,
                    }
                    assert!(listed.len() <= all.len(), "{order:?} limit {limit}: no end");
                }
                assert_eq!(listed, expected, "{order:?}, {limit} per page");
            }
        }
    }
}
