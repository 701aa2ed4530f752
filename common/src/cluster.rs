//! Cluster descriptions: which nodes exist, in which LM and partition, with which
//! capacity and machine constraints.
//!
//! Two sources: a Megha simulator config file (reproduced node for node) and a
//! generated cluster whose machine constraints are drawn with the measured fractions
//! of `constraint-model.md`.

use crate::constraint_model::MACHINE_CONSTRAINT_FRACTIONS;
use crate::rng::{seeded, streams, Rng};
use crate::{ConstraintSet, GmId, LmId, NodeId, Resources};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One worker node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSpec {
    pub capacity: Resources,
    pub constraints: ConstraintSet,
}

/// One Local Master's cluster: `partitions[g]` lists the nodes GM `g` owns.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LmSpec {
    pub id: LmId,
    pub partitions: Vec<Vec<NodeSpec>>,
}

impl LmSpec {
    pub fn node_count(&self) -> usize {
        self.partitions.iter().map(Vec::len).sum()
    }

    /// Nodes in LM order (partition 0 first), each with its home partition.
    pub fn nodes(&self) -> impl Iterator<Item = (NodeId, GmId, &NodeSpec)> + '_ {
        self.partitions
            .iter()
            .enumerate()
            .flat_map(|(g, nodes)| nodes.iter().map(move |n| (GmId(g as u16), n)))
            .enumerate()
            .map(|(i, (g, n))| (NodeId(i as u32), g, n))
    }
}

/// The whole data center.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterSpec {
    pub gms: u16,
    pub lms: Vec<LmSpec>,
}

/// Why a cluster description was refused.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("cluster config is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("cluster config field `{field}`: {reason}")]
    Invalid { field: String, reason: String },
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> ClusterError {
    ClusterError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

impl ClusterSpec {
    pub fn node_count(&self) -> usize {
        self.lms.iter().map(LmSpec::node_count).sum()
    }

    /// The sum of all node capacities.
    pub fn total_capacity(&self) -> Resources {
        self.lms
            .iter()
            .flat_map(|lm| lm.nodes().map(|(_, _, n)| n.capacity))
            .sum::<Resources>()
    }

    /// A generated cluster: `gms` partitions of `partition_size` nodes in each of `lms`
    /// LMs, every node with `capacity`, machine constraints drawn independently with
    /// the measured fractions (seeded).
    pub fn generate(
        gms: u16,
        lms: u16,
        partition_size: usize,
        capacity: Resources,
        seed: u64,
    ) -> ClusterSpec {
        let mut rng = seeded(seed, streams::CLUSTER);
        let lms = (0..lms)
            .map(|l| LmSpec {
                id: LmId(l),
                partitions: (0..gms)
                    .map(|_| {
                        (0..partition_size)
                            .map(|_| {
                                let mut constraints = ConstraintSet::EMPTY;
                                for (j, p) in MACHINE_CONSTRAINT_FRACTIONS.iter().enumerate() {
                                    if rng.random::<f64>() < *p {
                                        constraints.insert(j);
                                    }
                                }
                                NodeSpec {
                                    capacity,
                                    constraints,
                                }
                            })
                            .collect()
                    })
                    .collect(),
            })
            .collect();
        ClusterSpec { gms, lms }
    }

    /// Reads a Megha simulator config (`{"LMs": {"<lm>": {"partitions": {"<gm>":
    /// ["0b<bits>", ...]}}}}`): string `j` of a partition holds constraint `j` of each
    /// of its nodes, character `i` after `0b` being node `i`. LM and GM keys are sorted
    /// numerically and renumbered from zero. Every node gets `capacity`.
    pub fn from_megha_json(text: &str, capacity: Resources) -> Result<ClusterSpec, ClusterError> {
        let raw: MeghaConfig = serde_json::from_str(text)?;
        if raw.lms.is_empty() {
            return Err(invalid("LMs", "no local masters are listed"));
        }
        let mut lm_keys: Vec<(u64, &String)> = Vec::new();
        for key in raw.lms.keys() {
            let n = key
                .parse::<u64>()
                .map_err(|_| invalid(format!("LMs.{key}"), "LM keys must be integers"))?;
            lm_keys.push((n, key));
        }
        lm_keys.sort();
        let mut gms: Option<usize> = None;
        let mut lms = Vec::new();
        for (l, (_, key)) in lm_keys.iter().enumerate() {
            let lm = &raw.lms[*key];
            let mut part_keys: Vec<(u64, &String)> = Vec::new();
            for pk in lm.partitions.keys() {
                let n = pk.parse::<u64>().map_err(|_| {
                    invalid(
                        format!("LMs.{key}.partitions.{pk}"),
                        "partition keys must be integers",
                    )
                })?;
                part_keys.push((n, pk));
            }
            part_keys.sort();
            match gms {
                None => gms = Some(part_keys.len()),
                Some(g) if g != part_keys.len() => {
                    return Err(invalid(
                        format!("LMs.{key}.partitions"),
                        format!("has {} partitions, other LMs have {g}", part_keys.len()),
                    ))
                }
                _ => {}
            }
            let mut partitions = Vec::new();
            for (_, pk) in part_keys {
                let field = format!("LMs.{key}.partitions.{pk}");
                partitions.push(parse_partition(&lm.partitions[pk], &field, capacity)?);
            }
            lms.push(LmSpec {
                id: LmId(l as u16),
                partitions,
            });
        }
        let gms = gms.unwrap_or(0);
        if gms == 0 || gms > u16::MAX as usize {
            return Err(invalid(
                "LMs.*.partitions",
                "need 1..65535 partitions per LM",
            ));
        }
        Ok(ClusterSpec {
            gms: gms as u16,
            lms,
        })
    }
}

fn parse_partition(
    strings: &[String],
    field: &str,
    capacity: Resources,
) -> Result<Vec<NodeSpec>, ClusterError> {
    if strings.len() > crate::constraints::MAX_CONSTRAINTS {
        return Err(invalid(
            field,
            format!(
                "{} constraint strings; at most {} are supported",
                strings.len(),
                crate::constraints::MAX_CONSTRAINTS
            ),
        ));
    }
    let mut nodes: Option<Vec<NodeSpec>> = None;
    for (j, s) in strings.iter().enumerate() {
        let bits = s.strip_prefix("0b").ok_or_else(|| {
            invalid(
                format!("{field}[{j}]"),
                "constraint strings must start with 0b",
            )
        })?;
        let nodes = nodes.get_or_insert_with(|| {
            vec![
                NodeSpec {
                    capacity,
                    constraints: ConstraintSet::EMPTY
                };
                bits.len()
            ]
        });
        if bits.len() != nodes.len() {
            return Err(invalid(
                format!("{field}[{j}]"),
                format!("has {} bits, string 0 has {}", bits.len(), nodes.len()),
            ));
        }
        for (i, c) in bits.bytes().enumerate() {
            match c {
                b'1' => nodes[i].constraints.insert(j),
                b'0' => {}
                other => {
                    return Err(invalid(
                        format!("{field}[{j}]"),
                        format!("character {:?} at bit {i} is not 0 or 1", other as char),
                    ))
                }
            }
        }
    }
    nodes.ok_or_else(|| invalid(field, "partition has no constraint strings"))
}

#[derive(Deserialize)]
struct MeghaConfig {
    #[serde(rename = "LMs")]
    lms: BTreeMap<String, MeghaLm>,
}

#[derive(Deserialize)]
struct MeghaLm {
    partitions: BTreeMap<String, Vec<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const TINY: &str = r#"{"LMs": {"1": {"LM_id": "1", "partitions": {
        "1": ["0b101", "0b011"], "2": ["0b10", "0b11"] }}}}"#;

    #[test]
    fn megha_config_is_read_node_for_node() {
        let c = ClusterSpec::from_megha_json(TINY, Resources::cores(1, 1024)).unwrap();
        assert_eq!(c.gms, 2);
        assert_eq!(c.node_count(), 5);
        let p0: Vec<_> = c.lms[0].partitions[0]
            .iter()
            .map(|n| n.constraints)
            .collect();
        assert_eq!(
            p0,
            vec![
                ConstraintSet::from_ids([0]).unwrap(),
                ConstraintSet::from_ids([1]).unwrap(),
                ConstraintSet::from_ids([0, 1]).unwrap()
            ]
        );
    }

    #[test]
    fn ragged_strings_name_the_field() {
        let bad = r#"{"LMs": {"1": {"partitions": {"1": ["0b101", "0b01"]}}}}"#;
        let err = ClusterSpec::from_megha_json(bad, Resources::cores(1, 1)).unwrap_err();
        assert!(err.to_string().contains("LMs.1.partitions.1[1]"), "{err}");
    }

    #[test]
    fn generation_is_seeded() {
        let a = ClusterSpec::generate(2, 3, 50, Resources::cores(1, 1), 7);
        let b = ClusterSpec::generate(2, 3, 50, Resources::cores(1, 1), 7);
        let c = ClusterSpec::generate(2, 3, 50, Resources::cores(1, 1), 8);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(a.node_count(), 300);
        // constraint 20 is present on every node of the model
        assert!(a.lms[0].nodes().all(|(_, _, n)| n.constraints.contains(20)));
    }
}
