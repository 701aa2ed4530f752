//! Named node attributes (issue 36): `gpu`, `ssd`, `rack=r3`, `zone=a`... mapped onto
//! the anonymous constraint bits of [`ConstraintSet`], one bit per attribute value
//! (`rack=r3` and `rack=r4` are two bits). The GM's view keeps one bit-vector per bit
//! per partition, as for Megha's numbered constraints, so a named attribute costs
//! nothing more at placement time.
//!
//! A cluster with no names (every Megha config) has an empty [`Attributes`]; its
//! numbered constraints keep working unchanged. A described cluster
//! ([`crate::cluster_described`]) names its nodes' attributes and gets the bits
//! allocated here, in sorted order, so that the same description always gives the
//! same bits.

use crate::constraints::MAX_CONSTRAINTS;
use crate::ConstraintSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Attribute names and their bits.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Attributes {
    bits: BTreeMap<String, usize>,
}

/// Why a name or a bit was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttributeError {
    #[error(
        "attribute name {0:?} is not valid (letters, digits, `_`, `-`, `.`, optionally `=value`)"
    )]
    BadName(String),
    #[error("attribute {name:?}: bit {bit} is out of range (bits are 0..{MAX_CONSTRAINTS})")]
    OutOfRange { name: String, bit: usize },
    #[error("attribute {name:?}: bit {bit} is already {other:?}'s")]
    Taken {
        name: String,
        bit: usize,
        other: String,
    },
    #[error("more than {MAX_CONSTRAINTS} attribute values")]
    Full,
    #[error("unknown attribute {0:?}")]
    Unknown(String),
}

/// True for `key` or `key=value`, each made of ASCII letters, digits, `_`, `-`, `.`.
pub fn valid_name(name: &str) -> bool {
    let part = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
    };
    match name.split_once('=') {
        Some((key, value)) => part(key) && part(value),
        None => part(name),
    }
}

impl Attributes {
    /// No names (a Megha config).
    pub fn new() -> Self {
        Self::default()
    }

    /// Megha's numbered constraints by number: `c0` .. `c63` (what a GM that knows
    /// no names of its cluster accepts in utility trees).
    pub fn numbered() -> Self {
        Attributes {
            bits: (0..MAX_CONSTRAINTS).map(|b| (format!("c{b}"), b)).collect(),
        }
    }

    /// The names a job may use: these, or Megha's numbered ones (`c0` .. `c63`) when
    /// the cluster names none.
    pub fn or_numbered(self) -> Self {
        if self.is_empty() {
            Self::numbered()
        } else {
            self
        }
    }

    /// True for [`Attributes::numbered`]'s names.
    pub fn is_numbered(&self) -> bool {
        *self == Self::numbered()
    }

    /// Every name and its bit, in name order.
    pub fn names(&self) -> impl Iterator<Item = (&str, usize)> {
        self.bits.iter().map(|(n, b)| (n.as_str(), *b))
    }

    /// Names `bit` `name` (for a cluster whose numbered constraints get names).
    pub fn name_bit(&mut self, name: &str, bit: usize) -> Result<(), AttributeError> {
        if !valid_name(name) {
            return Err(AttributeError::BadName(name.to_owned()));
        }
        if bit >= MAX_CONSTRAINTS {
            return Err(AttributeError::OutOfRange {
                name: name.to_owned(),
                bit,
            });
        }
        if let Some((other, _)) = self.bits.iter().find(|(n, b)| **b == bit && *n != name) {
            return Err(AttributeError::Taken {
                name: name.to_owned(),
                bit,
                other: other.clone(),
            });
        }
        self.bits.insert(name.to_owned(), bit);
        Ok(())
    }

    /// The bit of `name`, given the lowest free bit at or above `from` if it has none.
    pub fn define(&mut self, name: &str, from: usize) -> Result<usize, AttributeError> {
        if let Some(bit) = self.bit(name) {
            return Ok(bit);
        }
        let used = self.used();
        let bit = (from..MAX_CONSTRAINTS)
            .find(|b| !used.contains(*b))
            .ok_or(AttributeError::Full)?;
        self.name_bit(name, bit)?;
        Ok(bit)
    }

    /// The bits named so far.
    pub fn used(&self) -> ConstraintSet {
        let mut set = ConstraintSet::EMPTY;
        self.bits.values().for_each(|b| set.insert(*b));
        set
    }

    pub fn is_empty(&self) -> bool {
        self.bits.is_empty()
    }

    /// The bit of an attribute value (`gpu`, `rack=r3`).
    pub fn bit(&self, name: &str) -> Option<usize> {
        self.bits.get(name).copied()
    }

    /// The set of `names`, each of which must be known.
    pub fn set<'a, I: IntoIterator<Item = &'a str>>(
        &self,
        names: I,
    ) -> Result<ConstraintSet, AttributeError> {
        let mut set = ConstraintSet::EMPTY;
        for name in names {
            let bit = self
                .bit(name)
                .ok_or_else(|| AttributeError::Unknown(name.to_owned()))?;
            set.insert(bit);
        }
        Ok(set)
    }

    /// Every value of a multi-valued attribute `key` (`rack` -> `rack=r0`, `rack=r1`...),
    /// with its bit, in name order.
    pub fn values(&self, key: &str) -> Vec<(&str, usize)> {
        self.bits
            .iter()
            .filter(|(n, _)| n.split_once('=').is_some_and(|(k, _)| k == key))
            .map(|(n, b)| (n.as_str(), *b))
            .collect()
    }

    /// True when `key` is a multi-valued attribute here (some `key=value` is named).
    pub fn is_key(&self, key: &str) -> bool {
        !self.values(key).is_empty()
    }

    /// The names of the bits of `set` that have one, in bit order; unnamed bits as
    /// their number.
    pub fn describe(&self, set: ConstraintSet) -> Vec<String> {
        set.iter()
            .map(|b| {
                self.bits
                    .iter()
                    .find(|(_, bit)| **bit == b)
                    .map_or_else(|| b.to_string(), |(n, _)| n.clone())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        let table: &[(&str, bool)] = &[
            ("gpu", true),
            ("rack=r3", true),
            ("zone=eu-1.a", true),
            ("", false),
            ("rack=", false),
            ("=r3", false),
            ("a b", false),
            ("a=b=c", false),
        ];
        for (name, want) in table {
            assert_eq!(valid_name(name), *want, "{name:?}");
        }
    }

    #[test]
    fn values_get_bits_of_their_own() {
        let mut a = Attributes::new();
        assert_eq!(a.define("gpu", 21), Ok(21));
        assert_eq!(a.define("rack=r0", 21), Ok(22));
        assert_eq!(a.define("rack=r1", 21), Ok(23));
        assert_eq!(a.define("gpu", 21), Ok(21), "defined once");
        assert_eq!(a.values("rack"), vec![("rack=r0", 22), ("rack=r1", 23)]);
        assert!(a.is_key("rack") && !a.is_key("gpu"));
        assert_eq!(
            a.set(["gpu", "rack=r1"]),
            Ok(ConstraintSet::from_ids([21, 23]).unwrap())
        );
        assert_eq!(a.set(["gpux"]), Err(AttributeError::Unknown("gpux".into())));
        assert_eq!(
            a.describe(ConstraintSet::from_ids([3, 21]).unwrap()),
            vec!["3".to_string(), "gpu".to_string()]
        );
    }

    #[test]
    fn numbered_names_are_the_bits() {
        let a = Attributes::numbered();
        assert_eq!(
            (a.bit("c0"), a.bit("c63"), a.bit("c64")),
            (Some(0), Some(63), None)
        );
    }

    #[test]
    fn a_bit_has_one_name() {
        let mut a = Attributes::new();
        a.name_bit("ssd", 4).unwrap();
        assert!(matches!(
            a.name_bit("gpu", 4),
            Err(AttributeError::Taken { .. })
        ));
        assert!(matches!(
            a.name_bit("gpu", 64),
            Err(AttributeError::OutOfRange { .. })
        ));
        for i in 0..63 {
            a.define(&format!("v{i}"), 0).unwrap();
        }
        assert_eq!(a.define("one-too-many", 0), Err(AttributeError::Full));
    }
}
