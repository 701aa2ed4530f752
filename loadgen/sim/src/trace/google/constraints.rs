//! Maps the trace's own constraints, `(name, relation, value)` triples, to machine
//! constraint ids `0..MAX_CONSTRAINTS` of our [`ConstraintSet`], in order of first
//! appearance in the input. A task requiring triple `k` fits the machines that carry
//! id `k`; which machines do is the cluster builder's business.

use super::event::{RawConstraint, RELATIONS};
use common::constraints::MAX_CONSTRAINTS;
use common::ConstraintSet;
use std::collections::HashMap;

#[derive(Debug, Default)]
pub struct ConstraintRegistry {
    ids: HashMap<RawConstraint, usize>,
    order: Vec<RawConstraint>,
}

impl ConstraintRegistry {
    /// The set of ids for `list`, assigning new ids to unseen triples; `Err` names the
    /// first triple that would need id 64 or more.
    pub fn map(&mut self, list: &[RawConstraint]) -> Result<ConstraintSet, String> {
        let mut set = ConstraintSet::EMPTY;
        for c in list {
            let id = match self.ids.get(c) {
                Some(&id) => id,
                None => {
                    if self.order.len() >= MAX_CONSTRAINTS {
                        return Err(format!(
                            "more than {MAX_CONSTRAINTS} distinct constraints; {} does not fit",
                            describe(c)
                        ));
                    }
                    let id = self.order.len();
                    self.ids.insert(c.clone(), id);
                    self.order.push(c.clone());
                    id
                }
            };
            set.insert(id);
        }
        Ok(set)
    }

    /// How many ids are assigned.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The mapping in id order: `(id, triple)`.
    pub fn mapping(&self) -> impl Iterator<Item = (usize, &RawConstraint)> {
        self.order.iter().enumerate()
    }

    /// One line per id, for a report.
    pub fn describe_all(&self) -> Vec<String> {
        self.mapping()
            .map(|(id, c)| format!("constraint {id} = {}", describe(c)))
            .collect()
    }
}

/// `name RELATION value`, e.g. `arch EQUAL x86`.
pub fn describe(c: &RawConstraint) -> String {
    let rel = RELATIONS.get(c.relation as usize).copied().unwrap_or("?");
    format!("{} {rel} {:?}", c.name, c.value)
}
