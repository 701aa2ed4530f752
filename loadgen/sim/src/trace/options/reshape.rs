//! [`TraceOptions`] (window, sampling, first N, speed-up, resource scaling) and the
//! iterator adapter that applies them ([`Selected`]). A leaf: `args.rs` builds it.

use crate::trace::{TraceError, TraceJob};
use common::rng::{seeded, streams, Rng, SeededRng};
use common::{Micros, Resources};

/// Selection and reshaping of a trace.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceOptions {
    pub window_start: Option<Micros>,
    pub window_end: Option<Micros>,
    pub first_jobs: Option<u64>,
    pub sample: Option<Sampling>,
    pub speedup: Option<SpeedUp>,
    pub scale: ResourceScale,
    /// Whether the simulator should synthesise task constraints (carried only).
    pub synthesize_constraints: bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    /// Fraction of jobs kept, in `(0, 1]`.
    pub fraction: f64,
    pub seed: u64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpeedUp {
    /// Arrivals (and optionally durations) are divided by this; `> 0`.
    pub factor: f64,
    pub compress_durations: bool,
}

/// Multipliers applied to every task's resources.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ResourceScale {
    pub cpu: f64,
    pub memory: f64,
}

impl ResourceScale {
    pub const IDENTITY: ResourceScale = ResourceScale {
        cpu: 1.0,
        memory: 1.0,
    };
    /// The Megha paper's scaling of trace requests: CPU / 400, memory / 50.
    pub const MEGHA: ResourceScale = ResourceScale {
        cpu: 1.0 / 400.0,
        memory: 1.0 / 50.0,
    };

    fn apply(&self, r: Resources) -> Resources {
        let scale = |v: u64, f: f64| {
            if v == 0 {
                0
            } else {
                ((v as f64 * f).round() as u64).max(1)
            }
        };
        Resources::new(
            scale(r.cpu_millis, self.cpu),
            scale(r.memory_mb, self.memory),
        )
    }
}

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions {
            window_start: None,
            window_end: None,
            first_jobs: None,
            sample: None,
            speedup: None,
            scale: ResourceScale::IDENTITY,
            synthesize_constraints: false,
        }
    }
}

/// An invalid option value, naming the command-line flag.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--{flag}: {reason}")]
pub struct OptionError {
    pub flag: &'static str,
    pub reason: String,
}

impl OptionError {
    pub fn new(flag: &'static str, reason: impl Into<String>) -> Self {
        OptionError {
            flag,
            reason: reason.into(),
        }
    }
}

impl TraceOptions {
    /// Checks every value; errors name the flag.
    pub fn validate(&self) -> Result<(), OptionError> {
        if let (Some(s), Some(e)) = (self.window_start, self.window_end) {
            if e <= s {
                return Err(OptionError::new(
                    "window-end",
                    "must be after --window-start",
                ));
            }
        }
        if self.first_jobs == Some(0) {
            return Err(OptionError::new("first-jobs", "must be at least 1"));
        }
        if let Some(s) = self.sample {
            if !(s.fraction > 0.0 && s.fraction <= 1.0) {
                return Err(OptionError::new("sample", "must be a fraction in (0, 1]"));
            }
        }
        if let Some(s) = self.speedup {
            if !(s.factor.is_finite() && s.factor > 0.0) {
                return Err(OptionError::new("speedup", "must be a finite number > 0"));
            }
        }
        for (flag, f) in [
            ("cpu-scale", self.scale.cpu),
            ("mem-scale", self.scale.memory),
        ] {
            if !(f.is_finite() && f > 0.0) {
                return Err(OptionError::new(flag, "must be a finite number > 0"));
            }
        }
        Ok(())
    }

    /// A one-line description for logs (includes the sampling seed).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.window_start.is_some() || self.window_end.is_some() {
            let s = self.window_start.unwrap_or(Micros::ZERO);
            let e = self.window_end.map_or("end".to_owned(), |e| e.to_string());
            parts.push(format!("window [{s}, {e})"));
        }
        if let Some(s) = self.sample {
            parts.push(format!("sample {} of jobs, seed {}", s.fraction, s.seed));
        }
        if let Some(n) = self.first_jobs {
            parts.push(format!("first {n} jobs"));
        }
        if let Some(s) = self.speedup {
            let what = if s.compress_durations {
                "arrivals and durations"
            } else {
                "arrivals only"
            };
            parts.push(format!("speed-up x{} ({what})", s.factor));
        }
        if self.scale != ResourceScale::IDENTITY {
            parts.push(format!(
                "cpu x{} memory x{}",
                self.scale.cpu, self.scale.memory
            ));
        }
        if self.synthesize_constraints {
            parts.push("synthesised constraints".to_owned());
        }
        if parts.is_empty() {
            "whole trace, unchanged".to_owned()
        } else {
            parts.join("; ")
        }
    }

    /// Wraps `jobs` in the adapter, after validating the options.
    pub fn apply<I>(&self, jobs: I) -> Result<Selected<I>, OptionError>
    where
        I: Iterator<Item = Result<TraceJob, TraceError>>,
    {
        self.validate()?;
        Ok(Selected {
            inner: jobs,
            rng: self.sample.map(|s| seeded(s.seed, streams::SAMPLING)),
            opts: self.clone(),
            kept: 0,
        })
    }

    /// The job after steps 4 and 5 (speed-up and scaling).
    fn reshape(&self, mut job: TraceJob) -> TraceJob {
        if let Some(s) = self.speedup {
            let div = |m: Micros| Micros((m.0 as f64 / s.factor).round() as u64);
            job.arrival = div(job.arrival);
            if s.compress_durations {
                for t in &mut job.tasks {
                    t.duration = div(t.duration);
                }
            }
        }
        if self.scale != ResourceScale::IDENTITY {
            for t in &mut job.tasks {
                t.resources = t.resources.map(|r| self.scale.apply(r));
            }
        }
        job
    }
}

/// The streaming adapter made by [`TraceOptions::apply`]. Errors from the reader pass
/// through unchanged.
#[derive(Debug)]
pub struct Selected<I> {
    inner: I,
    opts: TraceOptions,
    rng: Option<SeededRng>,
    kept: u64,
}

impl<I> Iterator for Selected<I>
where
    I: Iterator<Item = Result<TraceJob, TraceError>>,
{
    type Item = Result<TraceJob, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.opts.first_jobs.is_some_and(|n| self.kept >= n) {
            return None;
        }
        loop {
            let mut job = match self.inner.next()? {
                Ok(job) => job,
                Err(e) => return Some(Err(e)),
            };
            let start = self.opts.window_start.unwrap_or(Micros::ZERO);
            if job.arrival < start || self.opts.window_end.is_some_and(|e| job.arrival >= e) {
                continue;
            }
            job.arrival = job.arrival - start;
            if let (Some(rng), Some(s)) = (self.rng.as_mut(), self.opts.sample) {
                if rng.random::<f64>() >= s.fraction {
                    continue;
                }
            }
            self.kept += 1;
            return Some(Ok(self.opts.reshape(job)));
        }
    }
}
