//! `--cluster` or `--gms`/`--lms`/`--partition-size`: the simulated cluster.

use anyhow::{bail, Context, Result};
use clap::Args;
use common::cluster::ClusterSpec;
use common::Resources;
use std::path::PathBuf;

/// Where the simulated cluster comes from: a Megha config file, or generated.
#[derive(Args, Debug, Clone)]
pub struct ClusterArgs {
    /// Megha simulator cluster config (JSON), reproduced node for node.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["gms", "lms", "partition_size"])]
    pub cluster: Option<PathBuf>,
    /// Generated cluster: number of Global Masters (= partitions per LM).
    #[arg(long, value_name = "N")]
    pub gms: Option<u16>,
    /// Generated cluster: number of Local Masters.
    #[arg(long, value_name = "M")]
    pub lms: Option<u16>,
    /// Generated cluster: nodes in each partition (nodes = gms x lms x this).
    #[arg(long, value_name = "P")]
    pub partition_size: Option<usize>,
    /// CPU cores per node. The default, 1, runs one task at a time per node as the
    /// Megha simulator does; the paper's nodes have 64.
    #[arg(long, default_value_t = 1, value_name = "CORES")]
    pub node_cpus: u64,
    /// Memory per node in MiB (paper: 16 GB).
    #[arg(long, default_value_t = 16384, value_name = "MIB")]
    pub node_memory_mb: u64,
}

impl ClusterArgs {
    pub fn load(&self, seed: u64) -> Result<ClusterSpec> {
        if self.node_cpus == 0 || self.node_memory_mb == 0 {
            bail!("--node-cpus and --node-memory-mb must be positive");
        }
        let capacity = Resources::cores(self.node_cpus, self.node_memory_mb);
        if let Some(path) = &self.cluster {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read cluster config {}", path.display()))?;
            return common::cluster_described::read_cluster_file(&text, capacity)
                .map(|(cluster, _names)| cluster)
                .with_context(|| format!("in cluster file {}", path.display()));
        }
        match (self.gms, self.lms, self.partition_size) {
            (Some(g), Some(l), Some(p)) if g > 0 && l > 0 && p > 0 => {
                Ok(ClusterSpec::generate(g, l, p, capacity, seed))
            }
            (Some(_), Some(_), Some(_)) => {
                bail!("--gms, --lms and --partition-size must all be positive")
            }
            _ => bail!("give either --cluster FILE or all of --gms, --lms and --partition-size"),
        }
    }
}
