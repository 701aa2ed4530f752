//! The name of a cluster: the identity every internal message carries (in the codec's
//! envelope, in an HTTP header, in the broker's exchange and queue names), so that two
//! clusters sharing a host or a broker never act on each other's messages.

use std::fmt;
use std::sync::Arc;

/// The default name (`--cluster-name` / `MEGHA_CLUSTER_NAME`); its exchanges are
/// `megha.state` and `megha.events`, the names used before clusters had names.
pub const DEFAULT_CLUSTER_NAME: &str = "megha";
/// The longest name accepted (it prefixes queue names, which the broker caps at 255).
pub const MAX_CLUSTER_NAME_LEN: usize = 64;

/// A validated cluster name: 1 to 64 of `a-z 0-9 - _`, starting with a letter or digit.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ClusterName(Arc<str>);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cluster name `{name}`: {why}")]
pub struct ClusterNameError {
    pub name: String,
    pub why: &'static str,
}

impl ClusterName {
    pub fn new(name: &str) -> Result<Self, ClusterNameError> {
        let err = |why| {
            Err(ClusterNameError {
                name: name.to_owned(),
                why,
            })
        };
        if name.is_empty() {
            return err("must not be empty");
        }
        if name.len() > MAX_CLUSTER_NAME_LEN {
            return err("must be at most 64 characters");
        }
        if !name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        {
            return err("may hold only lowercase letters, digits, `-` and `_`");
        }
        if !name.as_bytes()[0].is_ascii_alphanumeric() {
            return err("must start with a letter or a digit");
        }
        Ok(ClusterName(name.into()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for ClusterName {
    fn default() -> Self {
        ClusterName(DEFAULT_CLUSTER_NAME.into())
    }
}

impl fmt::Display for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for ClusterName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClusterName({})", self.0)
    }
}

impl std::str::FromStr for ClusterName {
    type Err = ClusterNameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ClusterName::new(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_validated_with_a_reason() {
        assert_eq!(ClusterName::default().as_str(), "megha");
        assert!(ClusterName::new("prod-eu_1").is_ok());
        for (bad, why) in [
            ("", "empty"),
            ("Prod", "lowercase"),
            ("a.b", "lowercase"),
            ("-a", "start"),
            (&"x".repeat(65), "64"),
        ] {
            let e = ClusterName::new(bad).expect_err(bad);
            assert!(e.to_string().contains(why), "{bad}: {e}");
        }
    }
}
