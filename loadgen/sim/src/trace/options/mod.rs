//! Options shared by `simulate` and `replay` that select and reshape a trace, as an
//! iterator adapter over `Result<TraceJob, TraceError>` that stays streaming.
//!
//! Applied to each job in this order:
//! 1. **window**: keep jobs arriving in `[start, end)`; arrivals are then counted from
//!    `start` (a job at `start` arrives at 0);
//! 2. **sampling**: keep each job with probability `fraction`, drawn from a generator
//!    seeded with `seed` (one draw per job reaching this step, so the same input and
//!    seed keep the same jobs);
//! 3. **first N**: stop after `N` jobs have been kept (the rest of the input is not read);
//! 4. **speed-up**: divide arrivals by the factor, and durations too when
//!    `compress_durations` is set;
//! 5. **resource scaling**: multiply CPU and memory by their factors (rounded, and
//!    never below 1 for a non-zero amount).
//!
//! Constraint synthesis is carried along for the simulator and not applied here.

mod args;
mod reshape;

pub use args::{clock_seed, ScalePreset, TraceOptionsArgs};
pub use reshape::{OptionError, ResourceScale, Sampling, Selected, SpeedUp, TraceOptions};
