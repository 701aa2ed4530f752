//! A cluster description whose nodes carry named attributes (issue 36): groups of
//! identical nodes per LM, each group with its capacity and its attributes (`gpu`,
//! `rack=r3`). Reading it gives the [`ClusterSpec`] every driver already takes and the
//! [`Attributes`] that name its bits; Megha configs ([`ClusterSpec::from_megha_json`])
//! are untouched.
//!
//! ```json
//! {"gms": 2, "lms": [{"nodes": [
//!   {"count": 4, "cpus": 8, "memory_mb": 16384, "attributes": ["gpu", "rack=r0"]},
//!   {"count": 12, "cpus": 8, "memory_mb": 16384, "attributes": ["rack=r1"]}]}]}
//! ```
//!
//! Bits are given in name order from 0. An LM's nodes are dealt to its partitions
//! (one per GM) round-robin in the order listed, so every GM owns some of each group.

use crate::attributes::Attributes;
use crate::cluster::{ClusterError, ClusterSpec, LmSpec, NodeSpec};
use crate::{ConstraintSet, LmId, Resources};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The JSON form.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DescribedCluster {
    pub gms: u16,
    pub lms: Vec<DescribedLm>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DescribedLm {
    pub nodes: Vec<NodeGroup>,
}

/// `count` identical nodes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeGroup {
    pub count: usize,
    pub cpus: u64,
    pub memory_mb: u64,
    #[serde(default)]
    pub attributes: Vec<String>,
}

fn invalid(field: String, reason: impl Into<String>) -> ClusterError {
    ClusterError::Invalid {
        field,
        reason: reason.into(),
    }
}

impl DescribedCluster {
    /// Reads the JSON form and builds it.
    pub fn from_json(text: &str) -> Result<(ClusterSpec, Attributes), ClusterError> {
        let described: DescribedCluster = serde_json::from_str(text)?;
        described.build()
    }

    /// The cluster and the names of its bits.
    pub fn build(&self) -> Result<(ClusterSpec, Attributes), ClusterError> {
        if self.gms == 0 {
            return Err(invalid("gms".into(), "need at least one GM"));
        }
        if self.lms.is_empty() {
            return Err(invalid("lms".into(), "no local masters are listed"));
        }
        let mut names = BTreeSet::new();
        for (l, lm) in self.lms.iter().enumerate() {
            for (g, group) in lm.nodes.iter().enumerate() {
                for (a, name) in group.attributes.iter().enumerate() {
                    if !crate::attributes::valid_name(name) {
                        return Err(invalid(
                            format!("lms[{l}].nodes[{g}].attributes[{a}]"),
                            format!("{name:?} is not an attribute name"),
                        ));
                    }
                    names.insert(name.as_str());
                }
            }
        }
        let mut attributes = Attributes::new();
        for name in names {
            attributes
                .define(name, 0)
                .map_err(|e| invalid("lms[*].nodes[*].attributes".into(), e.to_string()))?;
        }
        let gms = usize::from(self.gms);
        let mut lms = Vec::new();
        for (l, lm) in self.lms.iter().enumerate() {
            let mut partitions: Vec<Vec<NodeSpec>> = vec![Vec::new(); gms];
            let mut i = 0;
            for group in &lm.nodes {
                let constraints: ConstraintSet = attributes
                    .set(group.attributes.iter().map(String::as_str))
                    .map_err(|e| invalid(format!("lms[{l}].nodes"), e.to_string()))?;
                let node = NodeSpec {
                    capacity: Resources::cores(group.cpus, group.memory_mb),
                    constraints,
                };
                for _ in 0..group.count {
                    partitions[i % gms].push(node);
                    i += 1;
                }
            }
            if i < gms {
                return Err(invalid(
                    format!("lms[{l}].nodes"),
                    format!("{i} nodes for {gms} partitions (one per GM)"),
                ));
            }
            lms.push(LmSpec {
                id: LmId(l as u16),
                partitions,
            });
        }
        Ok((ClusterSpec { gms: self.gms, lms }, attributes))
    }
}

/// Reads a cluster file of either kind: a description with named attributes (it has
/// a top-level `"gms"`) or a Megha config, whose nodes get `capacity` and whose bits
/// have no names. What `loadgen simulate --cluster`, the LM's and the GM's
/// `--cluster-file` take.
pub fn read_cluster_file(
    text: &str,
    capacity: Resources,
) -> Result<(ClusterSpec, Attributes), ClusterError> {
    let described = serde_json::from_str::<serde_json::Value>(text)?
        .get("gms")
        .is_some();
    if described {
        DescribedCluster::from_json(text)
    } else {
        ClusterSpec::from_megha_json(text, capacity).map(|c| (c, Attributes::new()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_RACKS: &str = r#"{"gms": 2, "lms": [{"nodes": [
        {"count": 2, "cpus": 8, "memory_mb": 1024, "attributes": ["gpu", "rack=r0"]},
        {"count": 4, "cpus": 4, "memory_mb": 1024, "attributes": ["rack=r1"]}]}]}"#;

    #[test]
    fn named_attributes_become_bits() {
        let (cluster, names) = DescribedCluster::from_json(TWO_RACKS).unwrap();
        assert_eq!(cluster.gms, 2);
        assert_eq!(cluster.node_count(), 6);
        assert_eq!(
            (names.bit("gpu"), names.bit("rack=r0"), names.bit("rack=r1")),
            (Some(0), Some(1), Some(2))
        );
        // Dealt round-robin: each partition has one GPU node and two of rack r1.
        for part in &cluster.lms[0].partitions {
            let gpu = part.iter().filter(|n| n.constraints.contains(0)).count();
            assert_eq!((part.len(), gpu), (3, 1));
        }
        assert_eq!(
            cluster.lms[0].partitions[0][0].capacity,
            Resources::cores(8, 1024)
        );
    }

    #[test]
    fn a_cluster_file_of_either_kind_reads() {
        let (described, names) = read_cluster_file(TWO_RACKS, Resources::cores(1, 1)).unwrap();
        assert_eq!((described.node_count(), names.bit("gpu")), (6, Some(0)));
        let megha = r#"{"LMs": {"1": {"partitions": {"1": ["0b101"], "2": ["0b11"]}}}}"#;
        let (cluster, names) = read_cluster_file(megha, Resources::cores(2, 64)).unwrap();
        assert!(names.is_empty(), "a Megha config names no bits");
        let direct = ClusterSpec::from_megha_json(megha, Resources::cores(2, 64)).unwrap();
        assert_eq!(cluster, direct, "read as the Megha config it is");
        assert!(read_cluster_file("{", Resources::cores(1, 1)).is_err());
    }

    #[test]
    fn a_bad_description_names_the_field() {
        let table: &[(&str, &str)] = &[
            (
                r#"{"gms": 1, "lms": [{"nodes": [{"count": 1, "cpus": 1, "memory_mb": 1, "attributes": ["a b"]}]}]}"#,
                "lms[0].nodes[0].attributes[0]",
            ),
            (r#"{"gms": 0, "lms": []}"#, "gms"),
            (r#"{"gms": 1, "lms": []}"#, "lms"),
            (
                r#"{"gms": 3, "lms": [{"nodes": [{"count": 2, "cpus": 1, "memory_mb": 1}]}]}"#,
                "lms[0].nodes",
            ),
        ];
        for (text, field) in table {
            let err = DescribedCluster::from_json(text).unwrap_err().to_string();
            assert!(err.contains(field), "{text}: {err}");
        }
    }
}
