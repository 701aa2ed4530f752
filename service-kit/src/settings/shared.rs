//! The settings every role shares, declared once and flattened into each role's flags
//! and config file (`#[command(flatten)] #[serde(flatten)] pub common: CommonArgs`).

use crate::logging::LogFormat;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Flags of every role: logging, the cluster's name and credential, TLS, and
/// `--print-config`.
#[derive(clap::Args, Clone, Debug, Default, Serialize, Deserialize)]
#[command(next_help_heading = "Common to every role")]
#[serde(default)]
pub struct CommonArgs {
    /// Print the effective configuration and exit: every setting, its value and
    /// where it came from (flag, environment, config file or default), as TOML that
    /// can serve as a --config file; passwords in URLs hidden. Exits 2 when the
    /// settings do not resolve, saying why.
    #[arg(long)]
    #[serde(skip)]
    pub print_config: bool,
    /// Log format: text or json. Default text.
    #[arg(long, env = "MEGHA_LOG_FORMAT", value_enum)]
    pub log_format: Option<LogFormat>,
    /// Threads that run this process's requests, actors and timers: 1 (the
    /// default) runs them all on one thread, so that no message is handed between
    /// threads (on the 2-core loopback cluster about 15% more task starts/s and 8%
    /// less CPU per task than 2: docs/security.md); N > 1 serves requests on a pool
    /// of N threads beside the actors' thread, so that `/healthz`, `/metrics` and
    /// reads not bound to the actor answer while it is busy (e.g. a designated GM
    /// with a long --lra-ilp-time-ms, or a journal on a slow disk).
    #[arg(long, env = "MEGHA_RUNTIME_THREADS", value_name = "N")]
    pub runtime_threads: Option<usize>,
    /// The cluster this process belongs to: carried by every internal message and
    /// naming the broker's exchanges (`NAME.state`, `NAME.events`); messages and calls
    /// of another cluster are refused. Give every GM, LM and worker of a cluster the
    /// same name. Lowercase letters, digits, `-`, `_`. Default megha.
    #[arg(long, env = "MEGHA_CLUSTER_NAME", value_name = "NAME")]
    pub cluster_name: Option<String>,
    /// File holding the cluster secret every internal call carries (shared by GMs,
    /// LMs and workers; or the secret itself in MEGHA_CLUSTER_SECRET). Without either
    /// the process runs open, allowed only on a loopback --listen. Or this role's
    /// credential file (gm.toml, lm.toml or worker.toml of
    /// scripts/make-role-credentials.sh): its key signs every internal request, and
    /// nothing secret is sent.
    #[arg(long, env = "MEGHA_CLUSTER_SECRET_FILE", value_name = "FILE")]
    pub cluster_secret_file: Option<PathBuf>,
    /// HTTPS: certificate chain (PEM) this role serves; with --tls-key-file. Default:
    /// plain HTTP (fine on loopback; use TLS where hosts are separate).
    #[arg(long, env = "MEGHA_TLS_CERT_FILE", value_name = "FILE")]
    pub tls_cert_file: Option<PathBuf>,
    /// HTTPS: the private key (PEM) of --tls-cert-file.
    #[arg(long, env = "MEGHA_TLS_KEY_FILE", value_name = "FILE")]
    pub tls_key_file: Option<PathBuf>,
    /// A CA (PEM) to trust, besides the system roots, when calling https:// peers
    /// and amqps:// brokers (e.g. the cluster's private CA).
    #[arg(long, env = "MEGHA_TLS_CA_FILE", value_name = "FILE")]
    pub tls_ca_file: Option<PathBuf>,
}

impl CommonArgs {
    /// The log format (default text).
    pub fn log_format(&self) -> LogFormat {
        self.log_format.unwrap_or_default()
    }

    /// The log format and the runtime's threads, checked (`--runtime-threads` 1 to
    /// 1024).
    pub fn process(&self) -> anyhow::Result<crate::runtime::ProcessSettings> {
        let threads = match self.runtime_threads {
            None => 1,
            Some(n @ 1..=1024) => n,
            Some(n) => anyhow::bail!(
                "--runtime-threads {n}: must be 1 (one thread for everything) to 1024"
            ),
        };
        Ok(crate::runtime::ProcessSettings {
            log_format: self.log_format(),
            runtime_threads: threads,
        })
    }

    /// The cluster's name, validated (default `megha`).
    pub fn cluster_name(&self) -> anyhow::Result<::common::ClusterName> {
        match self.cluster_name.as_deref() {
            None => Ok(::common::ClusterName::default()),
            Some(n) => {
                ::common::ClusterName::new(n).map_err(|e| anyhow::anyhow!("--cluster-name: {e}"))
            }
        }
    }

    /// HTTPS and the extra CA clients trust.
    pub fn tls(&self) -> anyhow::Result<crate::tls::TlsSettings> {
        crate::tls::TlsSettings::resolve(
            self.tls_cert_file.clone(),
            self.tls_key_file.clone(),
            self.tls_ca_file.clone(),
        )
    }

    /// The cluster credential (`None`: open mode, loopback only).
    pub fn cluster_secret(&self) -> anyhow::Result<Option<crate::auth::ClusterSecret>> {
        crate::auth::ClusterSecret::load(self.cluster_secret_file.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn threads(n: Option<usize>) -> anyhow::Result<usize> {
        let args = CommonArgs {
            runtime_threads: n,
            ..CommonArgs::default()
        };
        args.process().map(|p| p.runtime_threads)
    }

    #[test]
    fn runtime_threads_default_to_one_and_out_of_range_is_refused_by_name() {
        assert_eq!(threads(None).expect("default"), 1);
        assert_eq!(threads(Some(1)).expect("one"), 1);
        assert_eq!(threads(Some(4)).expect("four"), 4);
        for bad in [0, 1025] {
            let e = threads(Some(bad)).expect_err("out of range").to_string();
            assert!(
                e.contains("--runtime-threads") && e.contains(&bad.to_string()),
                "{e}"
            );
        }
    }
}
