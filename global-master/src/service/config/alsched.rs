//! The soft-constraint settings (docs/alsched.md): the attribute names of
//! `--cluster-file` and the cap of the exact batch solve, `--soft-ilp-ms`.

use anyhow::{bail, Context as _, Result};

/// The attribute names of `--cluster-file` (a described cluster), or the numbered
/// ones (`c0` .. `c63`) without a file or for a Megha config. The file must be the
/// cluster of `gms` GMs the LMs run.
pub(super) fn attribute_names(
    file: Option<&std::path::Path>,
    gms: u16,
) -> Result<common::attributes::Attributes> {
    let Some(path) = file else {
        return Ok(common::attributes::Attributes::numbered());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read --cluster-file {}", path.display()))?;
    // Capacities do not matter here: only the names are kept.
    let (cluster, names) =
        common::cluster_described::read_cluster_file(&text, common::Resources::cores(1, 1))
            .with_context(|| format!("in --cluster-file {}", path.display()))?;
    if cluster.gms != gms {
        bail!(
            "--cluster-file {} has {} partitions per LM but --gms is {gms}",
            path.display(),
            cluster.gms
        );
    }
    Ok(names.or_numbered())
}

/// `--soft-ilp-ms`, checked (see [`crate::core::check_soft_ilp_ms`]).
pub(super) fn soft_ilp_ms(ms: Option<u64>) -> Result<Option<u64>> {
    ms.map(crate::core::check_soft_ilp_ms)
        .transpose()
        .map_err(|e| anyhow::anyhow!("--soft-ilp-ms {e}"))
}
