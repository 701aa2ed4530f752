//! Running an experiment over many seeds, and comparing two policies by their
//! per-seed ratios (`experiment gangs --seeds`, `experiment alsched --seeds`). One
//! seed's result moves by several percent with pass timing alone (docs/gangs.md,
//! docs/alsched.md): a comparison is a distribution of ratios, not one number.

use anyhow::{bail, Result};
use serde_json::{json, Value};
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

/// The seeds `--seed FIRST --seeds N` names, refused with the flags named when
/// `N` is 0 or the range runs past `u64::MAX`.
pub fn range(first: u64, seeds: u64) -> Result<RangeInclusive<u64>> {
    if seeds == 0 {
        bail!("--seeds must be at least 1");
    }
    let Some(last) = first.checked_add(seeds - 1) else {
        bail!(
            "--seed {first} with --seeds {seeds}: the last seed is past {}",
            u64::MAX
        );
    };
    Ok(first..=last)
}

/// The seed flags of an experiment that runs over many seeds (flattened into its
/// arguments).
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct SeedFlags {
    /// The run's seed (the first, with --seeds).
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Run this many seeds, from --seed on: each in DIR/seed-S as a one-seed run
    /// writes it, and DIR/summary.json compares the policies over all of them: the
    /// per-seed ratios of the mean completion times, their mean, spread and 95%
    /// interval of the mean (normal approximation), and on how many seeds each side
    /// is faster. One seed's result moves by several percent with pass timing
    /// alone: compare policies over many seeds.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub seeds: u64,
    /// No table on stdout.
    #[arg(long)]
    pub quiet: bool,
}

/// Where seed `seed` of a many-seed run writes: `out/seed-S`.
fn dir(out: &Path, seed: u64) -> PathBuf {
    out.join(format!("seed-{seed}"))
}

/// What an experiment does per seed and over them (see [`run`]).
pub struct Experiment<'a, One, Compare, Print> {
    pub out: &'a Path,
    pub flags: &'a SeedFlags,
    /// One seed's run: writes its files to the directory given, prints its own
    /// table unless told quiet, and returns its summary.
    pub one: One,
    /// The comparison over every seed's summary, written to `out/summary.json`.
    pub compare: Compare,
    /// Prints the comparison.
    pub print: Print,
}

impl<One, Compare, Print> std::fmt::Debug for Experiment<'_, One, Compare, Print> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Experiment")
            .field("out", &self.out)
            .field("flags", &self.flags)
            .finish_non_exhaustive()
    }
}

/// `--seed FIRST --seeds N`: one seed writes to `out` itself; many each to
/// `out/seed-S` (quietly, one line per seed: its number), then their comparison to
/// `out/summary.json`, printed unless quiet.
pub fn run<One, Compare, Print>(e: Experiment<'_, One, Compare, Print>) -> Result<()>
where
    One: FnMut(u64, &Path, bool) -> Result<Value>,
    Compare: FnOnce(&[Value]) -> Value,
    Print: FnOnce(&Value),
{
    let SeedFlags {
        seed: first,
        seeds: n,
        quiet,
    } = *e.flags;
    let seeds = range(first, n)?;
    let mut one = e.one;
    if n == 1 {
        return one(first, e.out, quiet).map(|_| ());
    }
    println!("seeds: {} to {}", seeds.start(), seeds.end());
    let mut each = Vec::new();
    for seed in seeds {
        each.push(one(seed, &dir(e.out, seed), true)?);
    }
    let summary = (e.compare)(&each);
    let path = super::output::write_summary(e.out, &summary)?;
    if !quiet {
        (e.print)(&summary);
        println!("written to {} (each seed in seed-S/)", path.display());
    }
    Ok(())
}

/// Policy A against policy B over seeds: per seed, `a / b` of some figure (a mean
/// completion time: below 1, A is better).
#[derive(Clone, Debug, PartialEq)]
pub struct Ratios {
    /// Seeds with both figures.
    pub seeds: usize,
    /// Seeds where A's figure is below B's, and where B's is below A's (a tie
    /// counts for neither).
    pub a_lower: usize,
    pub b_lower: usize,
    pub mean: f64,
    /// Sample standard deviation (0 for one seed).
    pub sd: f64,
    /// 95% interval of the mean, normal approximation.
    pub ci95: (f64, f64),
    /// The figures' own means over the seeds, A's and B's.
    pub mean_a: f64,
    pub mean_b: f64,
}

impl Ratios {
    /// `None` when no seed has both figures: nothing to compare, which a summary
    /// says as `null` rather than as a ratio of 0.
    pub fn of(pairs: &[(f64, f64)]) -> Option<Ratios> {
        if pairs.is_empty() {
            return None;
        }
        let n = pairs.len() as f64;
        let ratios: Vec<f64> = pairs.iter().map(|(a, b)| a / b).collect();
        let mean = ratios.iter().sum::<f64>() / n;
        let var = ratios.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
        let half = 1.96 * (var / n).sqrt();
        Some(Ratios {
            seeds: pairs.len(),
            a_lower: pairs.iter().filter(|(a, b)| a < b).count(),
            b_lower: pairs.iter().filter(|(a, b)| b < a).count(),
            mean,
            sd: var.sqrt(),
            ci95: (mean - half, mean + half),
            mean_a: pairs.iter().map(|p| p.0).sum::<f64>() / n,
            mean_b: pairs.iter().map(|p| p.1).sum::<f64>() / n,
        })
    }

    /// As JSON: `seeds`, `<a>_better` and `<b>_better` (seeds where that side's
    /// figure is lower), `ratio_mean`, `ratio_sd`, `ratio_ci95` and
    /// `mean_of_means_s` by name; every figure `null` when `ratios` is `None`.
    pub fn json(ratios: Option<&Ratios>, a: &str, b: &str) -> Value {
        let Some(r) = ratios else {
            return json!({
                "seeds": 0, format!("{a}_better"): 0, format!("{b}_better"): 0,
                "ratio_mean": null, "ratio_sd": null, "ratio_ci95": null, "mean_of_means_s": null,
            });
        };
        json!({
            "seeds": r.seeds,
            format!("{a}_better"): r.a_lower,
            format!("{b}_better"): r.b_lower,
            "ratio_mean": r.mean,
            "ratio_sd": r.sd,
            "ratio_ci95": [r.ci95.0, r.ci95.1],
            "mean_of_means_s": {a: r.mean_a, b: r.mean_b},
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_against_hand_computed_figures() {
        // Ratios 0.5, 1.0 and 1.5: mean 1, sample sd 0.5, half-width 1.96 * 0.5 / sqrt 3.
        let r = Ratios::of(&[(1.0, 2.0), (3.0, 3.0), (6.0, 4.0)]).unwrap();
        assert_eq!((r.seeds, r.a_lower, r.b_lower), (3, 1, 1));
        assert!((r.mean - 1.0).abs() < 1e-12 && (r.sd - 0.5).abs() < 1e-12);
        let half = 1.96 * 0.5 / 3f64.sqrt();
        assert!((r.ci95.0 - (1.0 - half)).abs() < 1e-12);
        assert!((r.ci95.1 - (1.0 + half)).abs() < 1e-12);
        assert!((r.mean_a - 10.0 / 3.0).abs() < 1e-12 && (r.mean_b - 3.0).abs() < 1e-12);
        let j = Ratios::json(Some(&r), "x", "y");
        // The tie (3 against 3) counts for neither.
        assert_eq!(
            (j["x_better"].as_u64(), j["y_better"].as_u64()),
            (Some(1), Some(1))
        );
    }

    #[test]
    fn one_seed_has_no_spread_and_none_compares_nothing() {
        let r = Ratios::of(&[(2.0, 4.0)]).unwrap();
        assert_eq!((r.mean, r.sd, r.ci95), (0.5, 0.0, (0.5, 0.5)));
        assert_eq!(Ratios::of(&[]), None);
        let j = Ratios::json(None, "x", "y");
        assert!(j["ratio_mean"].is_null() && j["mean_of_means_s"].is_null());
        assert_eq!(j["seeds"], 0);
    }

    #[test]
    fn a_range_past_the_last_seed_or_of_none_is_refused() {
        assert_eq!(range(7, 3).unwrap(), 7..=9);
        assert_eq!(range(u64::MAX, 1).unwrap(), u64::MAX..=u64::MAX);
        assert!(range(u64::MAX, 2)
            .unwrap_err()
            .to_string()
            .contains("--seeds 2"));
        assert!(range(1, 0).unwrap_err().to_string().contains("--seeds"));
    }
}
