//! The constraint manager (MEDEA 4.1): every active constraint, the operator's and
//! each deployed application's, and the set a placement pass works with.

use super::constraints::{ConstraintError, PlacementConstraint};
use super::model::{LraId, NodeGroups};
use super::request::LraRequest;
use std::collections::BTreeMap;

/// Holds every active constraint: the operator's and each deployed application's.
#[derive(Clone, Debug, Default)]
pub struct ConstraintManager {
    operator: Vec<PlacementConstraint>,
    applications: BTreeMap<LraId, Vec<PlacementConstraint>>,
}

impl ConstraintManager {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add_operator(
        &mut self,
        constraint: PlacementConstraint,
        groups: &NodeGroups,
    ) -> Result<(), ConstraintError> {
        constraint.validate(groups)?;
        self.operator.push(constraint);
        Ok(())
    }

    /// Registers the constraints of a deployed application (all or none).
    pub fn add_application(
        &mut self,
        lra: LraId,
        constraints: Vec<PlacementConstraint>,
        groups: &NodeGroups,
    ) -> Result<(), ConstraintError> {
        validate_all(lra, &constraints, groups)?;
        self.applications.insert(lra, constraints);
        Ok(())
    }

    /// Forgets an application that finished.
    pub fn remove_application(&mut self, lra: LraId) {
        self.applications.remove(&lra);
    }

    /// The constraints a placer must consider: the deployed applications', those of
    /// `pending` applications, and the operator's. An application constraint that
    /// conflicts with a more restrictive operator constraint is overridden (dropped);
    /// otherwise it is tightened to the intersection of both ranges.
    pub fn effective_for(
        &self,
        pending: &[LraRequest],
        groups: &NodeGroups,
    ) -> Result<Vec<PlacementConstraint>, ConstraintError> {
        for lra in pending {
            validate_all(lra.id, &lra.constraints, groups)?;
        }
        let apps = self
            .applications
            .values()
            .flatten()
            .chain(pending.iter().flat_map(|l| l.constraints.iter()));
        let mut out: Vec<PlacementConstraint> =
            apps.filter_map(|c| self.override_by_operator(c)).collect();
        out.extend(self.operator.iter().cloned());
        Ok(out)
    }

    fn override_by_operator(&self, app: &PlacementConstraint) -> Option<PlacementConstraint> {
        let Some(mine) = app.simple() else {
            return Some(app.clone());
        };
        let mut result = app.clone();
        for op in &self.operator {
            let Some(theirs) = op.simple() else { continue };
            // The operator's constraint covers every container this one constrains.
            let same_target = theirs.c_tag == mine.c_tag && theirs.node_group == mine.node_group;
            if !same_target || !op.subject.is_subset_of(&app.subject) {
                continue;
            }
            let current = &mut result.any_of[0][0];
            if theirs.within(current) {
                // More restrictive: the operator's range replaces the application's.
                return None;
            }
            let min = current.c_min.max(theirs.c_min);
            let max = match (current.c_max, theirs.c_max) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if max.is_some_and(|m| m < min) {
                return None;
            }
            current.c_min = min;
            current.c_max = max;
        }
        Some(result)
    }
}

fn validate_all(
    lra: LraId,
    constraints: &[PlacementConstraint],
    groups: &NodeGroups,
) -> Result<(), ConstraintError> {
    for c in constraints {
        c.validate(groups)
            .map_err(|e| ConstraintError::InApplication {
                lra,
                source: Box::new(e),
            })?;
    }
    Ok(())
}
