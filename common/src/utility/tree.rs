//! A job's utility tree as users write it (the job API's `utility` field, JSON):
//! alsched's primitives and operators, and templates that expand to them.
//!
//! ```json
//! {"max": [{"nCk": {"set": "gpu", "k": 4, "u": 10}},
//!          {"LnCk": {"set": {"and": ["rack=r1", {"not": "ssd"}]}, "k": 2, "u": 1}}]}
//! {"prefer": {"set": "gpu", "else": "ssd"}}
//! {"same": {"attr": "rack"}}
//! ```

use crate::utility::set::SetExpr;
use serde::{Deserialize, Serialize};

/// One node of a utility tree.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UtilityTree {
    /// Utility `u` once `k` of the job's tasks run in `set`, else 0.
    #[serde(rename = "nCk")]
    NCk(Leaf),
    /// Linear partial credit: `u * min(n, k) / k` for `n` tasks in `set`.
    #[serde(rename = "LnCk")]
    LnCk(Leaf),
    /// The best child (OR of branches).
    Max(Vec<UtilityTree>),
    /// The worst child: every child must be satisfied (AND).
    Min(Vec<UtilityTree>),
    Sum(Vec<UtilityTree>),
    /// `s` times the child (priority weighting).
    Scale {
        s: f64,
        child: Box<UtilityTree>,
    },
    /// `b` once the child reaches `b`, else 0.
    Barrier {
        b: f64,
        child: Box<UtilityTree>,
    },
    /// Template: every task prefers `set`; with `else`, a task outside `set` prefers
    /// `else` (worth half).
    Prefer {
        set: SetExpr,
        #[serde(rename = "else", default, skip_serializing_if = "Option::is_none")]
        otherwise: Option<SetExpr>,
        /// Delay scheduling: wait this long for `set` before taking a lower branch.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        relax_after_s: Option<f64>,
        /// Delay scheduling counted in scheduling passes (YARN's node-locality
        /// delay): wait at most this many passes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        relax_after_passes: Option<u32>,
    },
    /// Template: every task in one value of `attr` (one rack) if possible.
    Same {
        attr: String,
    },
    /// Template: tasks over at least `k` values of `attr` (`k` racks).
    Spread {
        attr: String,
        k: u32,
    },
}

/// A leaf: a set of nodes, a count of tasks, a utility.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Leaf {
    pub set: SetExpr,
    pub k: u32,
    pub u: f64,
    /// Delay scheduling (Zaharia et al.): while the job has waited less than this
    /// (seconds, since a task of it was first held back), a task waits for a branch
    /// that gains rather than take one that does not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relax_after_s: Option<f64>,
    /// The same wait counted in the GM's scheduling passes in which a task of the
    /// job was held back (YARN's node-locality delay); the wait ends at whichever
    /// of the two limits comes first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relax_after_passes: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_round_trips_through_json() {
        let texts = [
            r#"{"nCk":{"set":"gpu","k":4,"u":10.0}}"#,
            r#"{"LnCk":{"set":{"and":["rack=r1",{"not":"ssd"}]},"k":2,"u":1.0}}"#,
            r#"{"max":[{"nCk":{"set":"gpu","k":1,"u":1.0}},{"sum":[]}]}"#,
            r#"{"scale":{"s":2.0,"child":{"min":[]}}}"#,
            r#"{"barrier":{"b":3.0,"child":{"same":{"attr":"rack"}}}}"#,
            r#"{"prefer":{"set":"gpu"}}"#,
            r#"{"prefer":{"set":"gpu","else":"ssd"}}"#,
            r#"{"prefer":{"set":"gpu","relax_after_s":5.0}}"#,
            r#"{"nCk":{"set":"gpu","k":1,"u":1.0,"relax_after_s":0.5}}"#,
            r#"{"LnCk":{"set":"gpu","k":1,"u":1.0,"relax_after_passes":3}}"#,
            r#"{"spread":{"attr":"zone","k":3}}"#,
        ];
        for text in texts {
            let tree: UtilityTree = serde_json::from_str(text).unwrap();
            assert_eq!(serde_json::to_string(&tree).unwrap(), text);
        }
    }
}
