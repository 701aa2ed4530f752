//! What a submission adds to an accepted job besides its tasks ([`JobParts`]).

use common::dag::JobDag;

/// The optional parts of an accepted job, each kept in a table of its own (so
/// that journals written before each part read as they were).
#[derive(Clone, Copy, Debug, Default)]
pub struct JobParts<'a> {
    pub dag: Option<&'a JobDag>,
    pub names: Option<&'a crate::service::admission::api::JobNames>,
    /// The packed spec, if it was kept.
    pub spec: Option<&'a [u8]>,
    pub gang: Option<&'a common::gang::GangSpec>,
}
