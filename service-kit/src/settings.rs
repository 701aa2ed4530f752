//! Configuration sources. Each service declares one struct of optional settings that
//! derives both `clap::Parser` (flags, with `env = ...`) and serde (the TOML file),
//! with the settings every role shares flattened in ([`CommonArgs`]); clap already
//! ranks flags above environment variables, then [`layer`] fills what is still unset
//! from the file ([`load_file`]), and the service applies its defaults last:
//! flags > env > file > defaults. [`effective`] prints the result and where each
//! value came from (`--print-config`).
//!
//! Layout: `layer` (file, layering, provenance), `shared` (the common flags); the
//! settings two roles parse alike (queues, Mercury's cap and quota) here.

mod layer;
mod preemption;
mod shared;

pub use layer::{effective, layer, load_file, parse, print_config};
pub use preemption::PreemptArgs;
pub use shared::CommonArgs;

use anyhow::{Context, Result};
use common::fairness::{FairnessConfig, SharePolicy};
use common::quota::QueueableQuota;
use std::sync::Arc;

/// Splits a comma-separated list, dropping empty items.
pub fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The user queues of `--queue NAME:SHARE:GM` (repeatable) and `--share-policy`,
/// shared by the GM and LM services. No queue: `None` (one implicit queue named
/// [`common::fairness::DEFAULT_QUEUE`], fairness off).
pub fn queues(
    specs: Option<&[String]>,
    policy: Option<SharePolicy>,
    gms: u16,
) -> Result<Option<Arc<FairnessConfig>>> {
    queues_with_rules(specs, policy, gms, &PreemptArgs::default())
}

/// [`queues`] with the rules that bound preemption (`--preempt-*`).
pub fn queues_with_rules(
    specs: Option<&[String]>,
    policy: Option<SharePolicy>,
    gms: u16,
    preempt: &PreemptArgs,
) -> Result<Option<Arc<FairnessConfig>>> {
    let specs = specs.unwrap_or_default();
    if specs.iter().all(|s| s.trim().is_empty()) {
        return Ok(None);
    }
    let config = FairnessConfig::from_specs(specs, policy.unwrap_or_default(), gms)
        .context("in --queue")?
        .with_rules(preempt.rules()?);
    Ok(Some(Arc::new(config)))
}

/// Mercury's `--queueable-quota` (none, max:N, ratio:R or max:N,ratio:R), shared
/// by the GM and LM services. Absent: no limit.
pub fn queueable_quota(text: Option<&str>) -> Result<QueueableQuota> {
    match text {
        Some(text) => text
            .parse::<QueueableQuota>()
            .map_err(|e| anyhow::anyhow!("--queueable-quota `{text}`: {e}")),
        None => Ok(QueueableQuota::UNLIMITED),
    }
}

/// Mercury's `--queueable-cap`, the share of a node running QUEUEABLE work may hold,
/// in (0, 1]; shared by every service. Absent: 1 (no cap).
pub fn queueable_cap(cap: Option<f64>) -> Result<f64> {
    let cap = cap.unwrap_or(1.0);
    if !(cap > 0.0 && cap <= 1.0) {
        anyhow::bail!("--queueable-cap must be in (0, 1], got {cap}");
    }
    Ok(cap)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queueable_settings_parse_or_name_the_flag() {
        assert_eq!(
            queueable_quota(None).expect("none"),
            QueueableQuota::UNLIMITED
        );
        let q = queueable_quota(Some("max:2,ratio:0.5")).expect("valid");
        assert_eq!((q.max, q.ratio), (Some(2), Some(0.5)));
        let err = queueable_quota(Some("max:x")).expect_err("bad");
        assert!(format!("{err:#}").contains("--queueable-quota"), "{err:#}");
        assert_eq!(queueable_cap(None).expect("default"), 1.0);
        assert_eq!(queueable_cap(Some(0.25)).expect("valid"), 0.25);
        for bad in [0.0, -1.0, 1.5, f64::NAN] {
            let err = queueable_cap(Some(bad)).expect_err("out of range");
            assert!(format!("{err:#}").contains("--queueable-cap"), "{err:#}");
        }
    }

    #[test]
    fn queue_settings_parse_or_name_the_flag() {
        assert!(queues(None, None, 2).expect("none").is_none());
        let specs = vec!["a:0.5:0".to_owned(), "b:0.25:1,c:0.25:1".to_owned()];
        let q = queues(Some(&specs), Some(SharePolicy::Cpu), 2)
            .expect("valid")
            .expect("some");
        assert_eq!(q.queues.len(), 3);
        assert_eq!(q.policy, SharePolicy::Cpu);
        assert_eq!(q.by_name("c").map(|s| s.gm.0), Some(1));
        let err = queues(Some(&["a:0.5:7".to_owned()]), None, 2).expect_err("bad gm");
        assert!(format!("{err:#}").contains("--queue"), "{err:#}");
    }
}
