//! Seeded randomness. ChaCha8 is portable: the same seed gives the same stream on
//! every platform and release, so a printed seed replays a run exactly.

pub use rand::Rng;
use rand::SeedableRng;
pub use rand_chacha::ChaCha8Rng as SeededRng;

/// A generator for `seed`, decorrelated per `stream` so that independent consumers
/// (cluster generation, constraint synthesis, sampling) do not share draws.
pub fn seeded(seed: u64, stream: u64) -> SeededRng {
    let mut rng = SeededRng::seed_from_u64(seed);
    rng.set_stream(stream);
    rng
}

/// Named streams, so that adding a consumer never shifts another one's draws.
pub mod streams {
    pub const CLUSTER: u64 = 1;
    pub const TASK_CONSTRAINTS: u64 = 2;
    pub const SPARROW: u64 = 3;
    pub const SAMPLING: u64 = 4;
    pub const TASK_TYPES: u64 = 5;
    /// Which jobs of a workload become gangs, and their sizes.
    pub const GANGS: u64 = 6;
}
