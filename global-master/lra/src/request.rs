//! What an LRA asks for: its containers ([`ContainerRequest`]) and its own placement
//! constraints ([`LraRequest`]).

use super::constraints::PlacementConstraint;
use super::model::{app_tag, ClusterState, ContainerRequest, LraId, ModelError, Tag};
use common::NodeId;
use common::Resources;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// A long-running application: its containers and its own placement constraints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LraRequest {
    pub id: LraId,
    pub containers: Vec<ContainerRequest>,
    pub constraints: Vec<PlacementConstraint>,
}

impl LraRequest {
    /// The sorted tags of container `j`, including the predefined `appID` tag.
    pub fn container_tags(&self, j: usize) -> Vec<Tag> {
        let mut tags: BTreeSet<Tag> = self
            .containers
            .get(j)
            .map(|c| c.tags.iter().cloned().collect())
            .unwrap_or_default();
        tags.insert(app_tag(self.id));
        tags.into_iter().collect()
    }

    /// The sum of all container demands.
    pub fn total_resources(&self) -> Resources {
        self.containers
            .iter()
            .map(|c| c.resources)
            .sum::<Resources>()
    }
}

impl LraRequest {
    /// Runs container `container` of this LRA on `node` in `cluster`: takes its
    /// resources and adds its tags. Refuses (and changes nothing) when the container
    /// does not exist or the node lacks the resources.
    pub fn deploy(
        &self,
        cluster: &mut ClusterState,
        container: usize,
        node: NodeId,
    ) -> Result<(), ModelError> {
        let request = self
            .containers
            .get(container)
            .ok_or_else(|| ModelError::Solution {
                lra: self.id,
                reason: format!("container {container} does not exist"),
            })?;
        cluster.deploy(
            self.id,
            container,
            request,
            self.container_tags(container),
            node,
        )
    }
}
