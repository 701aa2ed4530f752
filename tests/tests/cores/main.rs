//! The scheduling cores and the simulator, without services: one test binary (each
//! integration-test file used to link its own copy of every crate and of HiGHS).
//!
//! `cargo test -p tests --test cores` runs them all; add a module name to run one
//! group, e.g. `cargo test -p tests --test cores sim_lra`.

mod alsched;
mod alsched_ilp;
mod alsched_restart;
mod api_fuzz;
mod dag;
mod determinism;
mod fairness;
mod gm_abandon_batch;
mod gm_busy;
mod gm_lifecycle;
mod gm_placement;
mod gm_resend;
mod gm_restart;
mod gm_resume;
mod mercury;
mod mercury_quota;
mod oracle;
mod preemption_hold;
mod preemption_rules;
mod priorities;
mod priority_preemption;
mod sim_idle;
mod sim_lra;
mod sim_properties;
mod sim_publish;
mod wake_index;
