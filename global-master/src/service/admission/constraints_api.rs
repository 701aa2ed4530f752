//! A task's `constraints` (issue 36 item 1): constraint ids (0..64) or the names
//! of the cluster's node attributes (`gpu`, `rack=r3`; the GM's `--cluster-file`),
//! resolved to the set the placement tests. A refusal is a 422 naming the element.

use super::error::ApiError;
use common::attributes::Attributes;
use common::ConstraintSet;
use serde::Deserialize;

/// A constraint a task names: a bit by number, or an attribute by name.
#[derive(utoipa::ToSchema, Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum ConstraintRef {
    Id(u64),
    Name(String),
}

/// The set a task's `constraints` name (numbers and attribute names); a 422 names
/// the element at fault.
pub(super) fn check_constraints(
    field: &str,
    refs: &[ConstraintRef],
    names: &Attributes,
) -> Result<ConstraintSet, ApiError> {
    let mut set = ConstraintSet::EMPTY;
    for (j, r) in refs.iter().enumerate() {
        let bit = match r {
            ConstraintRef::Id(id) => usize::try_from(*id)
                .ok()
                .filter(|b| *b < common::constraints::MAX_CONSTRAINTS)
                .ok_or_else(|| {
                    format!(
                        "constraint id {id} is out of range (ids are 0..{})",
                        common::constraints::MAX_CONSTRAINTS
                    )
                }),
            ConstraintRef::Name(name) => names.bit(name).ok_or_else(|| {
                let known: Vec<&str> = names.names().map(|(n, _)| n).take(16).collect();
                let more = if names.names().count() > known.len() {
                    ", ..."
                } else {
                    ""
                };
                format!(
                    "unknown attribute {name:?}; this cluster names {}{more}",
                    known.join(", ")
                )
            }),
        }
        .map_err(|reason| ApiError::new(422, format!("{field}[{j}]"), reason))?;
        set.insert(bit);
    }
    Ok(set)
}
