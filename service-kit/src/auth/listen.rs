//! What a role checks before it starts: running open (without the cluster secret)
//! only on loopback, a role credential given to its own role, the extra CA loaded.

use super::secret::ClusterSecret;
use crate::roles::Role;
use anyhow::{bail, Result};
use std::net::IpAddr;

/// True when `listen` (host:port) binds only loopback.
pub fn is_loopback_listen(listen: &str) -> bool {
    let host = listen
        .rsplit_once(':')
        .map_or(listen, |(h, _)| h)
        .trim_start_matches('[')
        .trim_end_matches(']');
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Open mode (no credential) is allowed only on a loopback `listen`: an error naming
/// `how` (the flags that set the credential) otherwise; a loud warning when allowed.
pub fn open_mode_allowed(missing: &str, how: &str, listen: &str) -> Result<()> {
    if !is_loopback_listen(listen) {
        bail!("no {missing} configured and --listen {listen} is not loopback: set {how} (running without credentials is allowed only on a loopback address)");
    }
    tracing::warn!(
        listen,
        "OPEN MODE: no {missing} configured ({how}); any local process can call this service. Allowed only because it listens on loopback"
    );
    Ok(())
}

/// What every role checks before it starts: the extra CA its calls trust (if any) is
/// loaded, a role credential is this role's, and running without the cluster secret is allowed only on a loopback
/// `listen` (see [`open_mode_allowed`]).
pub fn check_start(
    ca: Option<&std::path::Path>,
    secret: Option<&ClusterSecret>,
    listen: &str,
    role: Role,
    id: Option<u16>,
) -> Result<()> {
    if let Some(ca) = ca {
        crate::tls::trust_ca(ca)?;
    }
    if let Some(theirs) = secret.and_then(ClusterSecret::role) {
        if theirs != role {
            bail!("--cluster-secret-file: the credential of the {theirs} role given to a {role}: each role needs its own file (see scripts/make-role-credentials.sh)");
        }
    }
    if let Some(theirs) = secret.and_then(ClusterSecret::id) {
        if id != Some(theirs) {
            bail!(
                "--cluster-secret-file: the credential of {role} {theirs} given to {role} {} (--id): each process needs its own file ({role}-{}.toml)",
                id.map_or_else(|| "without --id".to_owned(), |i| i.to_string()),
                id.unwrap_or(0)
            );
        }
    }
    if secret.is_none() {
        open_mode_allowed(
            "cluster secret",
            "--cluster-secret-file, MEGHA_CLUSTER_SECRET_FILE or MEGHA_CLUSTER_SECRET",
            listen,
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_mode_only_on_loopback() {
        for l in ["127.0.0.1:0", "[::1]:80", "localhost:9100"] {
            assert!(is_loopback_listen(l), "{l}");
            assert!(open_mode_allowed("secret", "--x", l).is_ok());
        }
        for l in ["0.0.0.0:8080", "10.1.2.3:80", "[::]:80", "example.org:80"] {
            assert!(!is_loopback_listen(l), "{l}");
            let err = open_mode_allowed("cluster secret", "--cluster-secret-file", l)
                .expect_err("refused");
            assert!(err.to_string().contains("--cluster-secret-file"), "{err}");
        }
    }
}
