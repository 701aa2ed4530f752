//! Configuration of the `worker` binary: flags > environment > TOML file > defaults.

use anyhow::{bail, Result};
use clap::Parser;
use serde::Deserialize;
use service_kit::logging::LogFormat;
use service_kit::merge_options;
use service_kit::settings::load_file;
use std::path::PathBuf;
use std::time::Duration;

/// A worker process of the Megha federated scheduler.
///
/// Registers with its Local Master as worker slot --slot, receives the nodes it runs
/// (node n of the LM belongs to slot n mod the LM's --workers), then runs the tasks the
/// LM starts (a synthetic task holds its resources for its duration) and reports each
/// start and finish back to the LM.
///
/// Minimal example:
///   worker --lm-url http://127.0.0.1:9100 --slot 0 --listen 127.0.0.1:9200
///
/// Settings also come from environment variables (shown below) or a TOML file
/// (--config; keys are the long flag names with `_`). Flags > env > file > defaults.
#[derive(Parser, Debug, Default, Deserialize)]
#[command(name = "worker", version, about, long_about, verbatim_doc_comment)]
#[serde(default, deny_unknown_fields)]
pub struct WorkerArgs {
    /// TOML configuration file.
    #[arg(long, env = "MEGHA_WORKER_CONFIG", value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// Base URL of this worker's Local Master. Default http://127.0.0.1:9100.
    #[arg(long, env = "MEGHA_WORKER_LM_URL", value_name = "URL")]
    pub lm_url: Option<String>,
    /// This worker's slot at its LM, 0..(LM's --workers), or `auto`: the LM gives it
    /// the first free slot (or the one this --advertise-url held before). Default 0.
    /// In a TOML file: a number (auto is 4294967295).
    #[arg(long, env = "MEGHA_WORKER_SLOT", value_parser = parse_slot)]
    pub slot: Option<u32>,
    /// Address for the worker's HTTP API. Default 127.0.0.1:9200 (port 0: any free).
    #[arg(long, env = "MEGHA_WORKER_LISTEN", value_name = "ADDR")]
    pub listen: Option<String>,
    /// URL the LM uses to reach this worker. Default http://<bound listen address>.
    #[arg(long, env = "MEGHA_WORKER_ADVERTISE_URL", value_name = "URL")]
    pub advertise_url: Option<String>,
    /// On SIGTERM, how long to wait for running tasks to finish. Default 30000.
    #[arg(long, env = "MEGHA_DRAIN_TIMEOUT_MS")]
    pub drain_timeout_ms: Option<u64>,
    /// Log format: text or json. Default text.
    #[arg(long, env = "MEGHA_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
}

/// `auto` or a slot number.
fn parse_slot(s: &str) -> Result<u32, String> {
    if s.eq_ignore_ascii_case("auto") {
        return Ok(common::messages::AUTO_SLOT);
    }
    s.parse()
        .map_err(|e| format!("expected a slot number or `auto`: {e}"))
}

#[derive(Clone, Debug)]
pub struct WorkerSettings {
    pub lm_url: String,
    pub slot: u32,
    pub listen: String,
    pub advertise_url: Option<String>,
    pub drain_timeout: Duration,
    pub log_format: LogFormat,
}

impl WorkerArgs {
    pub fn resolve(mut self) -> Result<WorkerSettings> {
        let file: WorkerArgs = load_file(self.config.as_deref())?;
        merge_options!(
            self,
            file,
            lm_url,
            slot,
            listen,
            advertise_url,
            drain_timeout_ms,
            log_format
        );
        let lm_url = self
            .lm_url
            .unwrap_or_else(|| "http://127.0.0.1:9100".into());
        if !lm_url.starts_with("http://") {
            bail!("--lm-url must be an http:// URL (got {lm_url})");
        }
        Ok(WorkerSettings {
            lm_url: lm_url.trim_end_matches('/').to_owned(),
            slot: self.slot.unwrap_or(0),
            listen: self.listen.unwrap_or_else(|| "127.0.0.1:9200".into()),
            advertise_url: self.advertise_url,
            drain_timeout: Duration::from_millis(self.drain_timeout_ms.unwrap_or(30_000)),
            log_format: self.log_format.unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_accepts_numbers_and_auto() {
        let args = WorkerArgs::try_parse_from(["worker", "--slot", "auto"]).expect("auto");
        assert_eq!(args.slot, Some(common::messages::AUTO_SLOT));
        let args = WorkerArgs::try_parse_from(["worker", "--slot", "3"]).expect("3");
        assert_eq!(args.slot, Some(3));
        assert!(WorkerArgs::try_parse_from(["worker", "--slot", "three"]).is_err());
    }
}
