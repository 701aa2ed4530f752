//! The `set` of a utility leaf: a boolean expression over node attributes (`gpu`,
//! `{"and": ["rack=r3", {"not": "ssd"}]}`), in its JSON form ([`SetExpr`]) and
//! compiled to constraint bits ([`BitExpr`]), which answers for one node (its
//! [`ConstraintSet`]) or for 64 slots at once (one raw word of each row: AND, OR and
//! NOT of partition bit-vectors, never bitvec's whole-vector ops).

use crate::ConstraintSet;
use serde::{Deserialize, Serialize};

/// A set of nodes as users write it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SetExpr {
    /// The nodes with this attribute value.
    Attr(String),
    Op(SetOp),
}

/// The operators of [`SetExpr`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SetOp {
    And(Vec<SetExpr>),
    Or(Vec<SetExpr>),
    Not(Box<SetExpr>),
}

impl SetExpr {
    pub fn attr(name: &str) -> Self {
        SetExpr::Attr(name.to_owned())
    }
}

/// A compiled set: attribute bits combined with AND, OR and NOT.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BitExpr {
    /// Every node.
    All,
    Bit(usize),
    And(Vec<BitExpr>),
    Or(Vec<BitExpr>),
    Not(Box<BitExpr>),
}

impl BitExpr {
    /// True when a node with attributes `node` is in the set.
    pub fn holds(&self, node: ConstraintSet) -> bool {
        match self {
            BitExpr::All => true,
            BitExpr::Bit(b) => node.contains(*b),
            BitExpr::And(xs) => xs.iter().all(|x| x.holds(node)),
            BitExpr::Or(xs) => xs.iter().any(|x| x.holds(node)),
            BitExpr::Not(x) => !x.holds(node),
        }
    }

    /// Word `w` of the set over a partition: `row(bit)` is that attribute's raw
    /// bit-vector (empty when no node of the partition has it). Bits past the last
    /// slot may be set (NOT); callers AND with the availability word.
    #[inline]
    pub fn word<'a>(&self, row: &impl Fn(usize) -> &'a [u64], w: usize) -> u64 {
        match self {
            BitExpr::All => u64::MAX,
            BitExpr::Bit(b) => row(*b).get(w).copied().unwrap_or(0),
            BitExpr::And(xs) => {
                let mut acc = u64::MAX;
                for x in xs {
                    acc &= x.word(row, w);
                    if acc == 0 {
                        break;
                    }
                }
                acc
            }
            BitExpr::Or(xs) => xs.iter().fold(0, |acc, x| acc | x.word(row, w)),
            BitExpr::Not(x) => !x.word(row, w),
        }
    }

    /// The conjunction of `self` and `other`.
    pub fn and(self, other: BitExpr) -> BitExpr {
        match (self, other) {
            (BitExpr::All, x) | (x, BitExpr::All) => x,
            (BitExpr::And(mut xs), BitExpr::And(ys)) => {
                xs.extend(ys);
                BitExpr::And(xs)
            }
            (BitExpr::And(mut xs), y) | (y, BitExpr::And(mut xs)) => {
                xs.push(y);
                BitExpr::And(xs)
            }
            (x, y) => BitExpr::And(vec![x, y]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(ids: &[u64]) -> ConstraintSet {
        ConstraintSet::from_ids(ids.iter().copied()).unwrap()
    }

    #[test]
    fn the_json_form_reads_names_and_operators() {
        let json = r#"{"and": ["rack=r3", {"not": "ssd"}, {"or": ["gpu", "fpga"]}]}"#;
        let got: SetExpr = serde_json::from_str(json).unwrap();
        let want = SetExpr::Op(SetOp::And(vec![
            SetExpr::attr("rack=r3"),
            SetExpr::Op(SetOp::Not(Box::new(SetExpr::attr("ssd")))),
            SetExpr::Op(SetOp::Or(vec![SetExpr::attr("gpu"), SetExpr::attr("fpga")])),
        ]));
        assert_eq!(got, want);
        assert_eq!(
            serde_json::from_str::<SetExpr>(&serde_json::to_string(&want).unwrap()).unwrap(),
            want
        );
    }

    /// Bits: 0 gpu, 1 ssd, 2 rack=r0.
    #[test]
    fn a_node_is_in_or_out() {
        use BitExpr::*;
        let gpu_not_ssd = And(vec![Bit(0), Not(Box::new(Bit(1)))]);
        let table: &[(&BitExpr, &[u64], bool)] = &[
            (&All, &[], true),
            (&Bit(0), &[0, 2], true),
            (&Bit(0), &[1], false),
            (&gpu_not_ssd, &[0], true),
            (&gpu_not_ssd, &[0, 1], false),
            (&Or(vec![Bit(1), Bit(2)]), &[2], true),
            (&Or(vec![Bit(1), Bit(2)]), &[0], false),
        ];
        for (expr, ids, want) in table {
            assert_eq!(expr.holds(node(ids)), *want, "{expr:?} on {ids:?}");
        }
    }

    #[test]
    fn words_agree_with_nodes() {
        use BitExpr::*;
        // Slot i has bit 0 when i is odd, bit 1 when i % 3 == 0 (two words).
        let rows: Vec<Vec<u64>> = (0..2)
            .map(|b| {
                (0..2)
                    .map(|w| {
                        (0..64)
                            .filter(|i| {
                                let slot = w * 64 + i;
                                if b == 0 {
                                    slot % 2 == 1
                                } else {
                                    slot % 3 == 0
                                }
                            })
                            .fold(0u64, |acc, i| acc | 1 << i)
                    })
                    .collect()
            })
            .collect();
        let empty: &[u64] = &[];
        let row = |b: usize| rows.get(b).map_or(empty, Vec::as_slice);
        let exprs = [
            All,
            Bit(0),
            Bit(5),
            And(vec![Bit(0), Bit(1)]),
            Or(vec![Bit(0), Bit(1)]),
            And(vec![Bit(0), Not(Box::new(Bit(1)))]),
        ];
        for expr in &exprs {
            for slot in 0..128usize {
                let mut has = ConstraintSet::EMPTY;
                if slot % 2 == 1 {
                    has.insert(0);
                }
                if slot % 3 == 0 {
                    has.insert(1);
                }
                let bit = expr.word(&row, slot / 64) >> (slot % 64) & 1 == 1;
                assert_eq!(bit, expr.holds(has), "{expr:?}, slot {slot}");
            }
        }
    }
}
