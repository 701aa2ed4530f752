//! Configuration of the `global-master` binary: flags > environment > TOML file >
//! defaults. Every flag's help text says what it is for and its default.

use anyhow::{bail, Result};
use clap::Parser;
use serde::Deserialize;
use service_kit::logging::LogFormat;
use service_kit::merge_options;
use service_kit::settings::load_file;
use std::path::PathBuf;
use std::time::Duration;

pub const DEFAULT_AMQP: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// A Global Master of the Megha federated scheduler.
///
/// Accepts jobs over HTTP (JSON), keeps an eventually consistent view of every Local
/// Master's nodes from the state they publish on RabbitMQ, places tasks (internal
/// partition first, then repartition) and sends batched launch requests to the LMs
/// over HTTP. Task lifecycle events go to the `megha.events` exchange.
///
/// Minimal example (two LMs, this GM is number 0 of 2):
///   global-master --id 0 --gms 2 --lm-urls http://127.0.0.1:9100,http://127.0.0.1:9101
///
/// Every setting can also come from an environment variable (shown below) or a TOML
/// file given with --config (keys are the long flag names with `_`, e.g.
/// `lm_urls = ["http://..."]`). Precedence: flags > environment > file > defaults.
#[derive(Parser, Debug, Default, Deserialize)]
#[command(
    name = "global-master",
    version,
    about,
    long_about,
    verbatim_doc_comment
)]
#[serde(default, deny_unknown_fields)]
pub struct GmArgs {
    /// TOML configuration file.
    #[arg(long, env = "MEGHA_GM_CONFIG", value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,
    /// This GM's number, 0..gms (it owns partition `id` of every LM). Default 0.
    #[arg(long, env = "MEGHA_GM_ID")]
    pub id: Option<u16>,
    /// How many GMs the cluster has (= partitions per LM). Default 1.
    #[arg(long, env = "MEGHA_GMS")]
    pub gms: Option<u16>,
    /// Base URLs of the LMs in LM-id order, comma-separated. Required.
    #[arg(
        long,
        env = "MEGHA_LM_URLS",
        value_delimiter = ',',
        value_name = "URL,..."
    )]
    pub lm_urls: Option<Vec<String>>,
    /// Address for the HTTP API. Default 127.0.0.1:8080 (port 0 picks a free port).
    #[arg(long, env = "MEGHA_GM_LISTEN", value_name = "ADDR")]
    pub listen: Option<String>,
    /// RabbitMQ URL. Default amqp://guest:guest@127.0.0.1:5672/%2f
    #[arg(long, env = "MEGHA_AMQP_URL", value_name = "URL")]
    pub amqp: Option<String>,
    /// Largest launch batch sent to one LM. Default 100.
    #[arg(long, env = "MEGHA_GM_BATCH_SIZE")]
    pub batch_size: Option<usize>,
    /// Tasks the GM holds (queued or awaiting an LM) before answering 429. Default 200000.
    #[arg(long, env = "MEGHA_GM_MAX_QUEUED")]
    pub max_queued: Option<usize>,
    /// Most tasks accepted in one POST /v1/jobs. Default 10000.
    #[arg(long, env = "MEGHA_GM_MAX_JOB_TASKS")]
    pub max_job_tasks: Option<usize>,
    /// Timeout of a launch request to an LM, in milliseconds. Default 5000.
    #[arg(long, env = "MEGHA_GM_LAUNCH_TIMEOUT_MS")]
    pub launch_timeout_ms: Option<u64>,
    /// On SIGTERM, how long to keep placing queued work before exiting. Default 10000.
    #[arg(long, env = "MEGHA_DRAIN_TIMEOUT_MS")]
    pub drain_timeout_ms: Option<u64>,
    /// Log format: text or json. Default text.
    #[arg(long, env = "MEGHA_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
}

/// Resolved settings.
#[derive(Clone, Debug)]
pub struct GmSettings {
    pub id: u16,
    pub gms: u16,
    pub lm_urls: Vec<String>,
    pub listen: String,
    pub amqp: String,
    pub batch_size: usize,
    pub max_queued: usize,
    pub max_job_tasks: usize,
    pub launch_timeout: Duration,
    pub drain_timeout: Duration,
    pub log_format: LogFormat,
}

impl GmArgs {
    pub fn resolve(mut self) -> Result<GmSettings> {
        let file: GmArgs = load_file(self.config.as_deref())?;
        merge_options!(
            self,
            file,
            id,
            gms,
            lm_urls,
            listen,
            amqp,
            batch_size,
            max_queued,
            max_job_tasks,
            launch_timeout_ms,
            drain_timeout_ms,
            log_format
        );
        let s = GmSettings {
            id: self.id.unwrap_or(0),
            gms: self.gms.unwrap_or(1),
            lm_urls: self.lm_urls.unwrap_or_default(),
            listen: self.listen.unwrap_or_else(|| "127.0.0.1:8080".into()),
            amqp: self.amqp.unwrap_or_else(|| DEFAULT_AMQP.into()),
            batch_size: self.batch_size.unwrap_or(100),
            max_queued: self.max_queued.unwrap_or(200_000),
            max_job_tasks: self.max_job_tasks.unwrap_or(10_000),
            launch_timeout: Duration::from_millis(self.launch_timeout_ms.unwrap_or(5000)),
            drain_timeout: Duration::from_millis(self.drain_timeout_ms.unwrap_or(10_000)),
            log_format: self.log_format.unwrap_or_default(),
        };
        if s.gms == 0 || s.id >= s.gms {
            bail!(
                "--id must be below --gms (got id {} of {} GMs)",
                s.id,
                s.gms
            );
        }
        if s.lm_urls.is_empty() {
            bail!("--lm-urls is required: the base URL of every LM, in LM-id order");
        }
        if s.batch_size == 0 || s.max_queued == 0 || s.max_job_tasks == 0 {
            bail!("--batch-size, --max-queued and --max-job-tasks must be at least 1");
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_beat_env_beat_file_beat_defaults() {
        let file = std::env::temp_dir().join(format!("gm-config-{}.toml", std::process::id()));
        std::fs::write(
            &file,
            "gms = 3\nid = 1\nbatch_size = 7\nmax_queued = 9\nlm_urls = [\"http://a\"]\n",
        )
        .expect("write");
        // The environment sets max_queued (beats the file); the flag sets id (beats both).
        std::env::set_var("MEGHA_GM_MAX_QUEUED", "11");
        std::env::set_var("MEGHA_GM_ID", "0");
        let args = GmArgs::try_parse_from([
            "global-master",
            "--config",
            file.to_str().expect("path"),
            "--id",
            "2",
        ])
        .expect("parse");
        let s = args.resolve().expect("resolve");
        std::env::remove_var("MEGHA_GM_MAX_QUEUED");
        std::env::remove_var("MEGHA_GM_ID");
        assert_eq!(s.id, 2, "flag");
        assert_eq!(s.max_queued, 11, "env");
        assert_eq!((s.gms, s.batch_size), (3, 7), "file");
        assert_eq!(s.max_job_tasks, 10_000, "default");
        assert_eq!(s.lm_urls, vec!["http://a".to_owned()]);
    }

    #[test]
    fn unknown_file_keys_and_bad_values_are_refused() {
        let file = std::env::temp_dir().join(format!("gm-bad-{}.toml", std::process::id()));
        std::fs::write(&file, "colour = 3\n").expect("write");
        let args = GmArgs::try_parse_from(["global-master", "--config", file.to_str().expect("p")])
            .expect("parse");
        assert!(args.resolve().is_err());
        let args = GmArgs::try_parse_from([
            "global-master",
            "--id",
            "3",
            "--gms",
            "2",
            "--lm-urls",
            "http://a",
        ])
        .expect("parse");
        assert!(args.resolve().is_err());
    }
}
