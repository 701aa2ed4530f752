//! Configuration sources. Each service declares one struct of optional settings that
//! derives both `clap::Args` (flags, with `env = ...`) and `serde::Deserialize` (the
//! TOML file); clap already ranks flags above environment variables, then
//! [`merge_options!`] fills what is still unset from the file, and the service applies
//! its defaults last: flags > env > file > defaults.

use anyhow::{Context, Result};
use common::fairness::{FairnessConfig, SharePolicy};
use common::quota::QueueableQuota;
use serde::de::DeserializeOwned;
use std::path::Path;
use std::sync::Arc;

/// Reads a TOML file of optional settings; `None` gives the empty (all unset) value.
pub fn load_file<T: DeserializeOwned + Default>(path: Option<&Path>) -> Result<T> {
    let Some(path) = path else {
        return Ok(T::default());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("in config file {}", path.display()))
}

/// `merge_options!(primary, fallback, a, b, c)` sets each listed `Option` field of
/// `primary` that is `None` to the value of the same field in `fallback`.
#[macro_export]
macro_rules! merge_options {
    ($primary:expr, $fallback:expr, $($field:ident),+ $(,)?) => {
        $( if $primary.$field.is_none() { $primary.$field = $fallback.$field.clone(); } )+
    };
}

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
    let specs = specs.unwrap_or_default();
    if specs.iter().all(|s| s.trim().is_empty()) {
        return Ok(None);
    }
    let config =
        FairnessConfig::from_specs(specs, policy.unwrap_or_default(), gms).context("in --queue")?;
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

/// `--cluster-name` / `MEGHA_CLUSTER_NAME`, validated; absent: `megha`.
pub fn cluster_name(name: Option<&str>) -> Result<common::ClusterName> {
    match name {
        None => Ok(common::ClusterName::default()),
        Some(n) => common::ClusterName::new(n).map_err(|e| anyhow::anyhow!("--cluster-name: {e}")),
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
