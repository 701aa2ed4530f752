//! The command-line form of [`TraceOptions`], shared by `simulate` and `replay`.

use super::{OptionError, ResourceScale, Sampling, SpeedUp, TraceOptions};
use common::Micros;

/// Named resource scalings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ScalePreset {
    /// No scaling.
    None,
    /// The Megha paper's: CPU / 400, memory / 50.
    Megha,
}

/// Trace selection flags. Convert with [`TraceOptionsArgs::into_options`].
#[derive(Clone, Debug, Default, PartialEq, clap::Args)]
pub struct TraceOptionsArgs {
    /// Keep jobs arriving at or after this many seconds (arrivals then count from it).
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    pub window_start: Option<f64>,
    /// Keep jobs arriving before this many seconds.
    #[arg(long, value_name = "SECS", allow_negative_numbers = true)]
    pub window_end: Option<f64>,
    /// Keep only the first N selected jobs.
    #[arg(long, value_name = "N")]
    pub first_jobs: Option<u64>,
    /// Keep this fraction of jobs, chosen at random (see --seed).
    #[arg(long, value_name = "FRACTION", allow_negative_numbers = true)]
    pub sample: Option<f64>,
    /// Seed for --sample; drawn from the clock (and printed) when absent.
    #[arg(long, value_name = "SEED")]
    pub sample_seed: Option<u64>,
    /// Divide arrival times by this factor.
    #[arg(long, value_name = "FACTOR", allow_negative_numbers = true)]
    pub speedup: Option<f64>,
    /// With --speedup, divide task durations by the factor too.
    #[arg(long, requires = "speedup")]
    pub speedup_durations: bool,
    /// Named resource scaling, combined with --cpu-scale / --mem-scale.
    #[arg(long, value_enum)]
    pub scale: Option<ScalePreset>,
    /// Multiply task CPU by this factor.
    #[arg(long, value_name = "FACTOR", allow_negative_numbers = true)]
    pub cpu_scale: Option<f64>,
    /// Multiply task memory by this factor.
    #[arg(long, value_name = "FACTOR", allow_negative_numbers = true)]
    pub mem_scale: Option<f64>,
    /// Let the simulator synthesise task constraints.
    #[arg(long)]
    pub synthesize_constraints: bool,
}

fn secs(flag: &'static str, v: Option<f64>) -> Result<Option<Micros>, OptionError> {
    match v {
        None => Ok(None),
        Some(s) if s.is_finite() && s >= 0.0 => Ok(Some(Micros::from_secs_f64(s))),
        Some(_) => Err(OptionError::new(
            flag,
            "must be a finite, non-negative number of seconds",
        )),
    }
}

impl TraceOptionsArgs {
    /// Validated options. `clock_seed` is used when --sample is given without --seed;
    /// the chosen seed is in the result (`sample.seed`) for the caller to print.
    pub fn into_options(self, clock_seed: u64) -> Result<TraceOptions, OptionError> {
        let preset = match self.scale.unwrap_or(ScalePreset::None) {
            ScalePreset::None => ResourceScale::IDENTITY,
            ScalePreset::Megha => ResourceScale::MEGHA,
        };
        if self.sample_seed.is_some() && self.sample.is_none() {
            return Err(OptionError::new(
                "sample-seed",
                "only meaningful with --sample",
            ));
        }
        let opts = TraceOptions {
            window_start: secs("window-start", self.window_start)?,
            window_end: secs("window-end", self.window_end)?,
            first_jobs: self.first_jobs,
            sample: self.sample.map(|fraction| Sampling {
                fraction,
                seed: self.sample_seed.unwrap_or(clock_seed),
            }),
            speedup: self.speedup.map(|factor| SpeedUp {
                factor,
                compress_durations: self.speedup_durations,
            }),
            scale: ResourceScale {
                cpu: preset.cpu * self.cpu_scale.unwrap_or(1.0),
                memory: preset.memory * self.mem_scale.unwrap_or(1.0),
            },
            synthesize_constraints: self.synthesize_constraints,
        };
        opts.validate()?;
        Ok(opts)
    }
}

/// A seed from the clock, for --sample without --seed.
pub fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
