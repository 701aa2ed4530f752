//! Mercury's flags ([`MercuryArgs`]): task types, and the QUEUEABLE placement and
//! load-shaping knobs.

use crate::sim::task_types::TaskTypes;
use crate::sim::SimConfig;
use anyhow::{bail, Result};
use clap::Args;
use common::Micros;

/// Mercury's task types and their placement and load-shaping knobs.
#[derive(Args, Debug, Clone)]
pub struct MercuryArgs {
    /// Container types (Mercury hybrid-GQ): short (the Megha path, default), only-g,
    /// only-q, hybrid (with --hybrid-td-s and --hybrid-pq) or hybrid:TD_S:PQ. Several
    /// (comma-separated) are run on the same trace and written to DIR/<types>/.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "short",
        value_name = "TYPES"
    )]
    pub task_types: Vec<String>,
    /// hybrid: tasks shorter than this many seconds may be QUEUEABLE (inf: all).
    #[arg(long, default_value_t = f64::INFINITY, value_name = "SECS")]
    pub hybrid_td_s: f64,
    /// hybrid: probability that an eligible task is QUEUEABLE.
    #[arg(long, default_value_t = 0.5, value_name = "P")]
    pub hybrid_pq: f64,
    /// The GM that schedules GUARANTEED tasks.
    #[arg(long, default_value_t = 0, value_name = "GM")]
    pub designated_gm: u16,
    /// QUEUEABLE tasks go to one of the k nodes with the least estimated queuing delay.
    #[arg(long, default_value_t = 4, value_name = "K")]
    pub top_k: usize,
    /// Share of each node running QUEUEABLE work may hold (0 < cap <= 1).
    #[arg(long, default_value_t = 1.0, value_name = "FRACTION")]
    pub queueable_cap: f64,
    /// Order of worker queues: job (earlier-submitted jobs first) or fifo.
    #[arg(long, default_value = "job", value_name = "ORDER")]
    pub queue_order: String,
    /// Shed queued QUEUEABLE work from nodes above mean + K sigma (off if absent).
    #[arg(long, value_name = "K")]
    pub shed_sigma: Option<f64>,
    /// Per-job quota on outstanding QUEUEABLE containers: none, max:N (absolute),
    /// ratio:R (R per GUARANTEED container of the job, at least 1) or max:N,ratio:R.
    #[arg(long, default_value = "none", value_name = "QUOTA")]
    pub queueable_quota: String,
    /// Promote QUEUEABLE containers that have run this many seconds to GUARANTEED
    /// at every LM heartbeat (off if absent).
    #[arg(long, value_name = "SECONDS")]
    pub promote_after_s: Option<f64>,
    /// Most promotions per LM heartbeat.
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub promote_per_tick: usize,
}

impl MercuryArgs {
    /// The task-type policies to run, in order.
    pub fn policies(&self) -> Result<Vec<TaskTypes>> {
        let mut out = Vec::new();
        for spec in &self.task_types {
            let policy = if spec == "hybrid" {
                let td = if self.hybrid_td_s == f64::INFINITY {
                    "inf".to_owned()
                } else {
                    self.hybrid_td_s.to_string()
                };
                format!("hybrid:{td}:{}", self.hybrid_pq).parse()
            } else {
                spec.parse()
            };
            out.push(policy.map_err(anyhow::Error::msg)?);
        }
        if out.is_empty() {
            out.push(TaskTypes::Short);
        }
        Ok(out)
    }

    pub fn apply(&self, config: &mut SimConfig) -> Result<()> {
        config.designated_gm = common::GmId(self.designated_gm);
        config.mercury = self.options()?;
        Ok(())
    }

    /// The QUEUEABLE knobs, checked (simulator and embedded services alike).
    pub fn options(&self) -> Result<crate::sim::MercuryOptions> {
        if !(self.queueable_cap > 0.0 && self.queueable_cap <= 1.0) {
            bail!("--queueable-cap must be in (0, 1]");
        }
        if self.top_k == 0 {
            bail!("--top-k must be at least 1");
        }
        if self.shed_sigma.is_some_and(|k| !k.is_finite()) {
            bail!("--shed-sigma must be a number");
        }
        let quota = self
            .queueable_quota
            .parse()
            .map_err(|e| anyhow::anyhow!("--queueable-quota: {e}"))?;
        let promote_after = match self.promote_after_s {
            Some(s) if s.is_finite() && s >= 0.0 => Some(Micros::from_secs_f64(s)),
            Some(_) => bail!("--promote-after-s must be a number of seconds >= 0"),
            None => None,
        };
        if self.promote_per_tick == 0 {
            bail!("--promote-per-tick must be at least 1");
        }
        Ok(crate::sim::MercuryOptions {
            top_k: self.top_k,
            cap: self.queueable_cap,
            queue_order: match self.queue_order.as_str() {
                "job" => worker_core::QueueOrder::JobSubmission,
                "fifo" => worker_core::QueueOrder::Fifo,
                other => bail!("--queue-order {other:?}: expected job or fifo"),
            },
            shed_sigma: self.shed_sigma,
            quota,
            promote_after,
            promote_per_tick: self.promote_per_tick,
            ..crate::sim::MercuryOptions::default()
        })
    }
}
