//! Whom a GM forwards to: the designated GM and every GM of the cluster by id, the
//! clients and credentials it calls them with, and its counters. Data and lookups
//! only (the decisions are in [`super`], the calls in [`super::relay`]).

use common::GmId;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Header a forwarding GM sets to its own id.
pub const FORWARDED_BY: &str = "x-megha-forwarded-by";

#[derive(Clone, Debug)]
pub struct Route {
    pub me: GmId,
    pub designated: GmId,
    /// Base URL of the designated GM (from `--designated-url` or `--gm-url`);
    /// `URL|URL` for a GM and its standby.
    pub designated_url: Option<String>,
    /// Base URL of every GM of the cluster by GM id (`--gm-url`; `URL|URL` for a GM
    /// and its standby): where requests naming another GM's job go. Empty: this GM
    /// answers for its own jobs (and the designated GM's) only.
    pub gm_urls: Vec<String>,
    /// Calls with a timeout (everything but followed logs).
    pub client: reqwest::Client,
    /// Calls without a total timeout, only a connect timeout: followed logs, which
    /// stay open as long as the task runs.
    pub streaming: reqwest::Client,
    /// With a role credential: each forwarded request is signed for the GM role.
    pub signing: Option<service_kit::auth::Signing>,
    /// Forwarded requests by outcome (`megha_gm_forwarded_total`), and the
    /// questions about jobs of other GMs.
    pub counters: Arc<ForwardCounters>,
}

/// Requests this GM forwarded to another GM, by outcome.
#[derive(Debug, Default)]
pub struct ForwardCounters {
    /// The other GM answered (whatever it answered).
    pub answered: AtomicU64,
    /// No address of the other GM could be reached (503 to the caller).
    pub unreachable: AtomicU64,
    /// Sent, but no answer came back (502 to the caller).
    pub failed: AtomicU64,
    /// Questions about jobs of other GMs that jobs here run after.
    pub after_polls: PollCounters,
}

impl ForwardCounters {
    /// `megha_gm_forwarded_total{outcome}`.
    pub fn render(&self, page: &mut service_kit::metrics::Page) {
        service_kit::metrics::counters(
            page,
            "megha_gm_forwarded_total",
            "Requests forwarded to another GM (the designated GM, or a job's owner), by outcome: answered, unreachable (503 to the caller), failed (502).",
            "outcome",
            &[
                ("answered", &self.answered),
                ("unreachable", &self.unreachable),
                ("failed", &self.failed),
            ],
        );
        self.after_polls.render(page);
    }
}

/// The GM number a job id carries in its top 16 bits.
pub fn job_owner(job: u64) -> u16 {
    (job >> 48) as u16
}

impl Route {
    /// The base URL of GM `gm` (`URL|URL` with a standby), when this GM knows it.
    pub fn url_of(&self, gm: GmId) -> Option<&str> {
        let listed = self.gm_urls.get(gm.index()).map(String::as_str);
        if gm == self.designated {
            self.designated_url.as_deref().or(listed)
        } else {
            listed
        }
    }

    /// The GMs of the cluster, by id (one: this GM, when it knows no other).
    pub fn gms(&self) -> Vec<GmId> {
        match self.gm_urls.len() {
            0 => vec![self.me],
            n => (0..n as u16).map(GmId).collect(),
        }
    }

    /// True when requests naming `job` are answered by another GM: its owner, when
    /// this GM knows the cluster's GMs (`--gm-url`), or the designated GM for a job it
    /// accepted on this GM's behalf (a forwarded GUARANTEED job).
    pub fn is_forwarded_job(route: Option<&Route>, job: u64) -> bool {
        route.is_some_and(|r| {
            let owner = job_owner(job);
            owner != r.me.0 && (owner == r.designated.0 || !r.gm_urls.is_empty())
        })
    }
}

/// Polls of other GMs for awaited jobs, by outcome (`megha_gm_remote_after_polls_total`).
#[derive(Debug, Default)]
pub struct PollCounters {
    pub ended: AtomicU64,
    pub active: AtomicU64,
    pub unknown: AtomicU64,
    pub unanswered: AtomicU64,
}

impl PollCounters {
    pub fn render(&self, page: &mut service_kit::metrics::Page) {
        service_kit::metrics::counters(
            page,
            "megha_gm_remote_after_polls_total",
            "Questions to other GMs about jobs that jobs here run after, by answer: ended, active, unknown (taken as failed), unanswered (asked again).",
            "answer",
            &[
                ("ended", &self.ended),
                ("active", &self.active),
                ("unknown", &self.unknown),
                ("unanswered", &self.unanswered),
            ],
        );
    }
}
