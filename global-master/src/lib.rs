//! placeholder

/// Long-running applications: MEDEA constraints and placers for the designated GM.
pub mod lra;
