//! The job-ordering policy and its knobs (see [`super`]).

use common::Micros;

/// In which order a GM tries its waiting tasks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum JobOrder {
    /// Today's behaviour: user queues round-robin, each in arrival order.
    #[default]
    Fifo,
    /// Dominant resource fairness between jobs (progressive filling).
    Drf,
    /// Tetris: pack for efficiency (alignment of demand with free resources), no
    /// fairness.
    Tetris,
    /// Shortest job first, by remaining critical path.
    Sjf,
    /// Carbyne: DRF shares; each job keeps only the tasks that must start now to
    /// finish by T_k; the leftover goes to the jobs with the least remaining work
    /// (SRTF), then is packed (Tetris).
    Carbyne,
}

impl JobOrder {
    pub const NAMES: [&'static str; 5] = ["fifo", "drf", "tetris", "sjf", "carbyne"];

    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "fifo" => Some(JobOrder::Fifo),
            "drf" => Some(JobOrder::Drf),
            "tetris" => Some(JobOrder::Tetris),
            "sjf" => Some(JobOrder::Sjf),
            "carbyne" => Some(JobOrder::Carbyne),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// The job-ordering policy and its knobs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OrderConfig {
    pub order: JobOrder,
    /// Carbyne's P(altruism): the probability that a job is altruistic (0 = DRF,
    /// 1 = every job; the paper's default).
    pub altruism: f64,
    /// Seeds which jobs are altruistic when `altruism` is between 0 and 1.
    pub seed: u64,
    /// Least time between two replans triggered by task ends (job arrivals and ends
    /// always replan).
    pub replan_every: Micros,
}

impl Default for OrderConfig {
    fn default() -> Self {
        OrderConfig {
            order: JobOrder::Fifo,
            altruism: 1.0,
            seed: 0,
            replan_every: Micros::from_millis(500),
        }
    }
}

impl OrderConfig {
    /// A configuration error names the field.
    pub fn check(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.altruism) {
            return Err(format!(
                "altruism must be between 0 and 1, not {}",
                self.altruism
            ));
        }
        Ok(())
    }

    /// Whether `job` is altruistic this run (a seeded hash, stable for the job).
    pub fn altruistic(&self, job: common::JobId) -> bool {
        if self.altruism >= 1.0 {
            return true;
        }
        if self.altruism <= 0.0 {
            return false;
        }
        let mut x = self.seed ^ job.0.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        // splitmix64 finaliser
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 31;
        ((x >> 11) as f64 / (1u64 << 53) as f64) < self.altruism
    }
}
