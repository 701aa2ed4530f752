//! Priority classes (issue 37 item 2): a cluster-wide list of named classes, each
//! with a value (higher goes first) and whether it may preempt lower classes of its
//! own queue. A job names its class on submission (else the default class); every
//! task of it carries the class's value ([`crate::TaskSpec::priority`]). A leaf.
//!
//! Within a queue a GM serves tasks by *virtual arrival*: a task of value `v` counts
//! as if it had been queued `v x aging` submissions earlier. So a higher class goes
//! first, and aging is the starvation guard: a lower-class task is overtaken by at
//! most `(w - v) x aging` tasks of a class `w` queued after it, then it goes first.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorityClass {
    pub name: String,
    /// Higher goes first; at most [`MAX_PRIORITY`].
    pub value: u16,
    /// May preempt running tasks of lower classes in its own queue.
    pub preempting: bool,
}

/// The largest class value.
pub const MAX_PRIORITY: u16 = 1000;

/// Aging when none is configured: submissions a class value point is worth.
pub const DEFAULT_AGING: u64 = 1000;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorityClasses {
    pub classes: Vec<PriorityClass>,
    /// The class of a job that names none.
    pub default: String,
    /// Submissions one point of class value is worth in the queue's order (0: no
    /// aging, strict priority).
    pub aging: u64,
}

impl Default for PriorityClasses {
    /// One class, `normal` (value 0, not preempting): no priorities.
    fn default() -> Self {
        PriorityClasses {
            classes: vec![PriorityClass {
                name: "normal".into(),
                value: 0,
                preempting: false,
            }],
            default: "normal".into(),
            aging: DEFAULT_AGING,
        }
    }
}

impl PriorityClasses {
    /// Parses `NAME:VALUE[:preempting]` items (each may hold several, comma
    /// separated); the default class is `default` or else the lowest.
    pub fn parse(specs: &[String], default: Option<&str>, aging: u64) -> Result<Self, String> {
        let mut classes: Vec<PriorityClass> = Vec::new();
        for spec in specs.iter().flat_map(|s| s.split(',')) {
            let spec = spec.trim();
            if spec.is_empty() {
                continue;
            }
            let syntax = || {
                format!("priority class `{spec}`: expected NAME:VALUE[:preempting], e.g. urgent:100:preempting")
            };
            let parts: Vec<&str> = spec.split(':').collect();
            let (name, value, preempting) = match parts.as_slice() {
                [n, v] => (*n, *v, false),
                [n, v, "preempting"] => (*n, *v, true),
                _ => return Err(syntax()),
            };
            let value: u16 = value.parse().map_err(|_| syntax())?;
            if name.is_empty() || value > MAX_PRIORITY {
                return Err(format!(
                    "priority class `{spec}`: a name and a value of 0 to {MAX_PRIORITY}"
                ));
            }
            if classes.iter().any(|c| c.name == name || c.value == value) {
                return Err(format!(
                    "priority class `{spec}`: names and values must be unique"
                ));
            }
            classes.push(PriorityClass {
                name: name.to_owned(),
                value,
                preempting,
            });
        }
        if classes.is_empty() {
            return Ok(PriorityClasses {
                aging,
                ..PriorityClasses::default()
            });
        }
        let default = match default {
            Some(d) if classes.iter().any(|c| c.name == d) => d.to_owned(),
            Some(d) => return Err(format!("the default priority class `{d}` is not listed")),
            None => classes
                .iter()
                .min_by_key(|c| c.value)
                .map(|c| c.name.clone())
                .unwrap_or_default(),
        };
        Ok(PriorityClasses {
            classes,
            default,
            aging,
        })
    }

    pub fn by_name(&self, name: &str) -> Option<&PriorityClass> {
        self.classes.iter().find(|c| c.name == name)
    }

    /// The value of the default class.
    pub fn default_value(&self) -> u16 {
        self.by_name(&self.default).map_or(0, |c| c.value)
    }

    /// Whether tasks of class value `value` may preempt lower classes.
    pub fn preempting(&self, value: u16) -> bool {
        self.classes
            .iter()
            .any(|c| c.value == value && c.preempting)
    }

    /// The names, for messages.
    pub fn names(&self) -> String {
        self.classes
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The place in its queue's line of the `seq`-th task queued, of class value
/// `value`, with `aging` submissions per point: smaller goes first. Unique per
/// (seq, value); with every value 0 it orders as `seq` does.
pub fn queue_key(seq: u64, value: u16, aging: u64) -> u64 {
    // No aging (0): strict priority.
    let per_point = if aging == 0 {
        1 << 30
    } else {
        aging.min(1 << 30)
    };
    let head_start = u64::from(value.min(MAX_PRIORITY)) * per_point;
    let virtual_seq = (seq + (1u64 << 41)).saturating_sub(head_start);
    (virtual_seq << 10) | u64::from(MAX_PRIORITY - value.min(MAX_PRIORITY))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_classes_and_their_default() {
        let c = PriorityClasses::parse(
            &["low:0,high:100:preempting".into(), "mid:50".into()],
            None,
            10,
        )
        .unwrap();
        assert_eq!(c.classes.len(), 3);
        assert_eq!(c.default, "low");
        assert!(c.preempting(100) && !c.preempting(50));
        assert_eq!(c.by_name("mid").map(|c| c.value), Some(50));
        assert!(PriorityClasses::parse(&["a:1,b:1".into()], None, 10).is_err());
        assert!(PriorityClasses::parse(&["a:x".into()], None, 10).is_err());
        assert!(PriorityClasses::parse(&["a:1:maybe".into()], None, 10).is_err());
        assert!(PriorityClasses::parse(&["a:1".into()], Some("b"), 10).is_err());
        assert_eq!(
            PriorityClasses::parse(&[], None, 10)
                .unwrap()
                .default_value(),
            0
        );
    }

    #[test]
    fn higher_classes_go_first_until_aging_lets_the_lower_one_through() {
        let aging = 10;
        // A low task queued at 0; high tasks (value 2) queued later go before it
        // while they are within 2 x 10 submissions of it.
        let low = queue_key(0, 0, aging);
        assert!(queue_key(19, 2, aging) < low);
        assert!(queue_key(21, 2, aging) > low);
        // Without classes the order is the arrival order.
        assert!(queue_key(4, 0, aging) < queue_key(5, 0, aging));
        // Unique keys.
        assert_ne!(queue_key(20, 2, aging), queue_key(0, 0, aging));
    }
}
