//! MEDEA placement constraints (section 4.2) and the constraint manager (section 3).
//!
//! A constraint `{subject_tag, {c_tag, c_min, c_max}, node_group}` asks that every
//! container matching `subject_tag` sits in a node set of `node_group` holding between
//! `c_min` and `c_max` *other* containers matching `c_tag`. Affinity is `(1, ∞)`,
//! anti-affinity `(0, 0)`, anything else a cardinality constraint. Compound constraints
//! are in disjunctive normal form: the subject must satisfy every tag constraint of at
//! least one clause. Constraints are soft with a weight; a hard constraint is emulated
//! with [`HARD_WEIGHT`] (MEDEA 4.2).

use super::model::{LraId, NodeGroups, TagSet};
use serde::{Deserialize, Serialize};

/// The default weight of a (soft) constraint.
pub const DEFAULT_WEIGHT: f64 = 1.0;
/// The weight that emulates a hard constraint.
pub const HARD_WEIGHT: f64 = 1000.0;

/// `{c_tag, c_min, c_max}` over the node sets of `node_group`. `c_max: None` is ∞.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TagConstraint {
    pub c_tag: TagSet,
    pub c_min: u32,
    pub c_max: Option<u32>,
    pub node_group: String,
}

impl TagConstraint {
    /// True when `count` other matching containers in the node set satisfy it.
    pub fn holds_for(&self, count: u32) -> bool {
        count >= self.c_min && self.c_max.is_none_or(|max| count <= max)
    }

    /// True when this constraint is at least as tight as `other` on both bounds.
    pub(crate) fn within(&self, other: &TagConstraint) -> bool {
        self.c_min >= other.c_min
            && match (self.c_max, other.c_max) {
                (_, None) => true,
                (None, Some(_)) => false,
                (Some(a), Some(b)) => a <= b,
            }
    }
}

/// A (possibly compound) placement constraint with its weight.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlacementConstraint {
    pub subject: TagSet,
    /// Disjunction of clauses; each clause is a conjunction of tag constraints.
    pub any_of: Vec<Vec<TagConstraint>>,
    pub weight: f64,
}

/// Why a constraint was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConstraintError {
    #[error("constraint field `{field}`: the tag set is empty or holds an empty tag")]
    EmptyTag { field: String },
    #[error("constraint field `{field}`: c_min {c_min} is above c_max {c_max}")]
    MinAboveMax {
        field: String,
        c_min: u32,
        c_max: u32,
    },
    #[error("constraint field `{field}`: unknown node group `{name}`")]
    UnknownNodeGroup { field: String, name: String },
    #[error("constraint field `{field}`: the expression has no clause or an empty clause")]
    EmptyExpression { field: String },
    #[error("constraint field `weight`: {weight} is not a finite number >= 0")]
    BadWeight { weight: f64 },
    #[error("{lra}: {source}")]
    InApplication {
        lra: LraId,
        #[source]
        source: Box<ConstraintError>,
    },
}

impl PlacementConstraint {
    /// A single tag constraint, soft with the default weight.
    pub fn new(
        subject: TagSet,
        c_tag: TagSet,
        c_min: u32,
        c_max: Option<u32>,
        node_group: &str,
    ) -> Self {
        PlacementConstraint {
            subject,
            any_of: vec![vec![TagConstraint {
                c_tag,
                c_min,
                c_max,
                node_group: node_group.to_string(),
            }]],
            weight: DEFAULT_WEIGHT,
        }
    }

    /// Each `subject` container in a node set with at least one `target` container.
    pub fn affinity(subject: TagSet, target: TagSet, node_group: &str) -> Self {
        Self::new(subject, target, 1, None, node_group)
    }

    /// Each `subject` container in a node set with no `target` container.
    pub fn anti_affinity(subject: TagSet, target: TagSet, node_group: &str) -> Self {
        Self::new(subject, target, 0, Some(0), node_group)
    }

    /// Each `subject` container in a node set with `c_min..=c_max` `target` containers.
    pub fn cardinality(
        subject: TagSet,
        target: TagSet,
        c_min: u32,
        c_max: u32,
        node_group: &str,
    ) -> Self {
        Self::new(subject, target, c_min, Some(c_max), node_group)
    }

    /// This constraint OR `other`'s clauses (same subject assumed; `other`'s subject
    /// is ignored).
    pub fn or(mut self, other: PlacementConstraint) -> Self {
        self.any_of.extend(other.any_of);
        self
    }

    pub fn with_weight(mut self, weight: f64) -> Self {
        self.weight = weight;
        self
    }

    /// Emulates a hard constraint with a large weight.
    pub fn hard(self) -> Self {
        self.with_weight(HARD_WEIGHT)
    }

    pub fn is_hard(&self) -> bool {
        self.weight >= HARD_WEIGHT
    }

    /// The single tag constraint, when this is not a compound constraint.
    pub fn simple(&self) -> Option<&TagConstraint> {
        match self.any_of.as_slice() {
            [clause] => match clause.as_slice() {
                [only] => Some(only),
                _ => None,
            },
            _ => None,
        }
    }

    /// Refuses empty tags, `c_min > c_max`, unknown node groups, empty expressions and
    /// bad weights, naming the field.
    pub fn validate(&self, groups: &NodeGroups) -> Result<(), ConstraintError> {
        check_tags(&self.subject, "subject_tag")?;
        if !self.weight.is_finite() || self.weight < 0.0 {
            return Err(ConstraintError::BadWeight {
                weight: self.weight,
            });
        }
        if self.any_of.is_empty() || self.any_of.iter().any(Vec::is_empty) {
            return Err(ConstraintError::EmptyExpression {
                field: "any_of".into(),
            });
        }
        for (i, clause) in self.any_of.iter().enumerate() {
            for (j, tc) in clause.iter().enumerate() {
                let field = format!("any_of[{i}][{j}]");
                check_tags(&tc.c_tag, &format!("{field}.c_tag"))?;
                if let Some(max) = tc.c_max {
                    if tc.c_min > max {
                        return Err(ConstraintError::MinAboveMax {
                            field,
                            c_min: tc.c_min,
                            c_max: max,
                        });
                    }
                }
                if groups.find(&tc.node_group).is_none() {
                    return Err(ConstraintError::UnknownNodeGroup {
                        field: format!("{field}.node_group"),
                        name: tc.node_group.clone(),
                    });
                }
            }
        }
        Ok(())
    }
}

fn check_tags(tags: &TagSet, field: &str) -> Result<(), ConstraintError> {
    if tags.is_empty() || tags.tags().iter().any(|t| t.trim().is_empty()) {
        return Err(ConstraintError::EmptyTag {
            field: field.into(),
        });
    }
    Ok(())
}
