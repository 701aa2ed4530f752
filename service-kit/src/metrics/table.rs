//! A role's metric families declared once as a table: each family's name, type, help
//! text and how to read its value from the state it reads (`S`: the GM's, the LM's or
//! the worker's actor, or one part of a shell such as the LM's broker backpressure).
//! [`render`] appends a table's families to a [`Page`] in the table's order.
//!
//! Families that need several reads at once or exist only in some configurations
//! (histograms, the worker's exec families) stay small functions called after the
//! table.

use super::{family, single, Page};
use common::Micros;
use std::fmt;

/// One metric family of `/metrics`, read from an `S`.
pub struct Metric<S> {
    pub name: &'static str,
    /// `counter` or `gauge`.
    pub kind: &'static str,
    pub help: &'static str,
    pub read: Read<S>,
}

/// How a family's value is read from an `S`.
pub enum Read<S> {
    /// One value.
    One(fn(&S) -> f64),
    /// One value per label value (the label's name first), read at a time (the
    /// scrape's wall clock) for the families that show ages.
    By(&'static str, fn(&S, Micros) -> Vec<(String, f64)>),
}

/// Appends every family of `table` to `out`, read from `state` at `now`.
pub fn render<S>(table: &[Metric<S>], state: &S, now: Micros, out: &mut Page) {
    for m in table {
        match &m.read {
            Read::One(read) => single(out, m.name, m.kind, m.help, read(state)),
            Read::By(label, read) => {
                family(out, m.name, m.kind, m.help, label, &read(state, now));
            }
        }
    }
}

// By hand: a derive would ask `S: Debug` of every state a table reads.
impl<S> fmt::Debug for Metric<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metric")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .field("help", &self.help)
            .field("read", &self.read)
            .finish()
    }
}

impl<S> fmt::Debug for Read<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Read::One(_) => f.write_str("One"),
            Read::By(label, _) => f.debug_tuple("By").field(label).finish(),
        }
    }
}

#[cfg(test)]
mod tests;
