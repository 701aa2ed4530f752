//! The LRA placement model (MEDEA section 4.1): container tags, long-running
//! applications made of tagged containers, nodes with the containers already running
//! on them, and node groups (node, rack and operator-defined groups such as fault or
//! upgrade domains) that split the cluster into node sets.

use common::{NodeId, Resources};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

/// A container tag, e.g. `hb`, `hb_m` or `appID:23`.
pub type Tag = Arc<str>;

/// The name of the predefined node group whose node sets are single nodes.
pub const NODE_GROUP: &str = "node";
/// The name of the predefined node group whose node sets are racks.
pub const RACK_GROUP: &str = "rack";

/// A long-running application.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LraId(pub u64);

impl fmt::Display for LraId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "lra{}", self.0)
    }
}

/// The predefined tag every container of `lra` carries (`appID:<n>`, MEDEA footnote 5).
pub fn app_tag(lra: LraId) -> Tag {
    Arc::from(format!("appID:{}", lra.0))
}

/// A conjunction of tags: a container matches when it carries every one of them.
/// Kept sorted and without duplicates.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TagSet(Vec<Tag>);

impl TagSet {
    pub fn new<I, T>(tags: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<Tag>,
    {
        let set: BTreeSet<Tag> = tags.into_iter().map(Into::into).collect();
        TagSet(set.into_iter().collect())
    }

    /// One tag.
    pub fn one(tag: impl Into<Tag>) -> Self {
        TagSet(vec![tag.into()])
    }

    pub fn tags(&self) -> &[Tag] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// True when the sorted `container_tags` hold every tag of this set.
    pub fn matches(&self, container_tags: &[Tag]) -> bool {
        self.0
            .iter()
            .all(|t| container_tags.binary_search(t).is_ok())
    }

    /// True when every tag of `self` is also in `other` (so `other` is narrower).
    pub fn is_subset_of(&self, other: &TagSet) -> bool {
        self.matches(&other.0)
    }
}

impl fmt::Display for TagSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<&str> = self.0.iter().map(|t| &**t).collect();
        write!(f, "{}", parts.join("∧"))
    }
}

/// One container an LRA asks for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainerRequest {
    pub resources: Resources,
    pub tags: Vec<Tag>,
}

impl ContainerRequest {
    pub fn new<I, T>(resources: Resources, tags: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<Tag>,
    {
        ContainerRequest {
            resources,
            tags: tags.into_iter().map(Into::into).collect(),
        }
    }
}

/// A container already running on a node. `tags` are sorted and include `appID`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeployedContainer {
    pub lra: Option<LraId>,
    pub resources: Resources,
    pub tags: Vec<Tag>,
}

/// One node as the LRA placer sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeState {
    pub capacity: Resources,
    pub free: Resources,
    /// Index of the node's rack.
    pub rack: u32,
    pub containers: Vec<DeployedContainer>,
}

impl NodeState {
    pub fn empty(capacity: Resources, rack: u32) -> Self {
        NodeState {
            capacity,
            free: capacity,
            rack,
            containers: Vec::new(),
        }
    }

    /// MEDEA's tag cardinality γ_n: how many containers here match `tags`.
    pub fn tag_cardinality(&self, tags: &TagSet) -> u32 {
        self.containers
            .iter()
            .filter(|c| tags.matches(&c.tags))
            .count() as u32
    }
}

/// An operator-defined node group: named, disjoint node sets (node indices).
/// Nodes in no set of the group are each treated as a singleton set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeGroupSpec {
    pub name: String,
    pub sets: Vec<Vec<u32>>,
}

/// Why a cluster description or a solution could not be taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("node group `{name}`: {reason}")]
    Group { name: String, reason: String },
    #[error("node {node}: {reason}")]
    Node { node: u32, reason: String },
    #[error("solution for {lra}: {reason}")]
    Solution { lra: LraId, reason: String },
}

/// Every node group: for group `g`, `set_of[g][n]` is the node set of node `n`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeGroups {
    names: Vec<String>,
    set_of: Vec<Vec<u32>>,
    set_counts: Vec<u32>,
}

impl NodeGroups {
    /// The predefined groups only: `node` and `rack`.
    fn predefined(nodes: &[NodeState]) -> Self {
        let n = nodes.len();
        let names = vec![NODE_GROUP.to_string(), RACK_GROUP.to_string()];
        let mut set_of = vec![(0..n as u32).collect::<Vec<u32>>()];
        let mut set_counts = vec![n as u32];
        // Racks are renumbered densely in order of first appearance.
        let mut rack_ids = std::collections::BTreeMap::new();
        let racks: Vec<u32> = nodes
            .iter()
            .map(|node| {
                let next = rack_ids.len() as u32;
                *rack_ids.entry(node.rack).or_insert(next)
            })
            .collect();
        set_of.push(racks);
        set_counts.push(rack_ids.len() as u32);
        NodeGroups {
            names,
            set_of,
            set_counts,
        }
    }

    fn build(nodes: &[NodeState], extra: &[NodeGroupSpec]) -> Result<Self, ModelError> {
        let n = nodes.len();
        let mut groups = NodeGroups::predefined(nodes);
        for spec in extra {
            let err = |reason: String| ModelError::Group {
                name: spec.name.clone(),
                reason,
            };
            if spec.name.trim().is_empty() {
                return Err(err("the name is empty".into()));
            }
            if groups.names.contains(&spec.name) {
                return Err(err("the name is already taken".into()));
            }
            let mut of = vec![u32::MAX; n];
            for (s, members) in spec.sets.iter().enumerate() {
                for &m in members {
                    let slot = of.get_mut(m as usize).ok_or_else(|| {
                        err(format!("set {s} names node {m}, which does not exist"))
                    })?;
                    if *slot != u32::MAX {
                        return Err(err(format!("node {m} is in more than one set")));
                    }
                    *slot = s as u32;
                }
            }
            let mut next = spec.sets.len() as u32;
            for slot in of.iter_mut().filter(|s| **s == u32::MAX) {
                *slot = next;
                next += 1;
            }
            groups.names.push(spec.name.clone());
            groups.set_of.push(of);
            groups.set_counts.push(next);
        }
        Ok(groups)
    }

    /// The index of the group called `name`.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The node set of `node` in group `group`.
    #[inline]
    pub fn set_of(&self, group: usize, node: usize) -> usize {
        self.set_of[group][node] as usize
    }

    pub fn set_count(&self, group: usize) -> usize {
        self.set_counts[group] as usize
    }
}

/// The cluster as the LRA placer sees it: nodes and node groups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterState {
    nodes: Vec<NodeState>,
    groups: NodeGroups,
}

impl ClusterState {
    /// Checks that free resources never exceed capacity and that every group is
    /// well formed.
    pub fn new(nodes: Vec<NodeState>, extra_groups: &[NodeGroupSpec]) -> Result<Self, ModelError> {
        for (i, node) in nodes.iter().enumerate() {
            if !node.capacity.fits(&node.free) {
                return Err(ModelError::Node {
                    node: i as u32,
                    reason: format!("free ({}) exceeds capacity ({})", node.free, node.capacity),
                });
            }
            if node.containers.iter().any(|c| !c.tags.is_sorted()) {
                return Err(ModelError::Node {
                    node: i as u32,
                    reason: "deployed container tags must be sorted".into(),
                });
            }
        }
        let groups = NodeGroups::build(&nodes, extra_groups)?;
        Ok(ClusterState { nodes, groups })
    }

    /// `racks` racks of `per_rack` empty nodes of `capacity` each.
    pub fn uniform(racks: u32, per_rack: u32, capacity: Resources) -> Self {
        let nodes = (0..racks)
            .flat_map(|r| (0..per_rack).map(move |_| NodeState::empty(capacity, r)))
            .collect::<Vec<_>>();
        let groups = NodeGroups::predefined(&nodes);
        ClusterState { nodes, groups }
    }

    pub fn nodes(&self) -> &[NodeState] {
        &self.nodes
    }

    pub fn groups(&self) -> &NodeGroups {
        &self.groups
    }

    /// MEDEA's γ_S for the node set `set` of group `group`.
    pub fn set_cardinality(&self, group: usize, set: usize, tags: &TagSet) -> u32 {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(n, _)| self.groups.set_of(group, *n) == set)
            .map(|(_, node)| node.tag_cardinality(tags))
            .sum()
    }

    /// Runs container `container` (`request`, with `tags`) of `lra` on `node`: takes its
    /// resources and adds its tags. Refuses (and changes nothing) when the node lacks the resources.
    pub fn deploy(
        &mut self,
        lra: LraId,
        container: usize,
        request: &ContainerRequest,
        tags: Vec<Tag>,
        node: NodeId,
    ) -> Result<(), ModelError> {
        let state = self
            .nodes
            .get_mut(node.index())
            .ok_or_else(|| ModelError::Solution {
                lra,
                reason: format!("{node} does not exist"),
            })?;
        state.free =
            state
                .free
                .checked_sub(&request.resources)
                .ok_or_else(|| ModelError::Solution {
                    lra,
                    reason: format!("container {container} does not fit on {node}"),
                })?;
        state.containers.push(DeployedContainer {
            lra: Some(lra),
            resources: request.resources,
            tags,
        });
        Ok(())
    }
}
