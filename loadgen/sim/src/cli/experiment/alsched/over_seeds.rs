//! `experiment alsched --seeds N`: every policy against `soft` and `soft_delay` over
//! the seeds, per load (DIR/summary.json), from each seed's own summary.

use crate::cli::experiment::seeds::Ratios;
use serde_json::{json, Map, Value};

/// What the comparison names: the run's flags it depends on, and the policies.
#[derive(Clone, Copy, Debug)]
pub struct Setup<'a> {
    pub first_seed: u64,
    pub seeds: u64,
    pub jobs: u64,
    pub loads: &'a [f64],
    pub policies: &'a [&'a str],
}

/// Every policy against `soft` and `soft_delay` over the seeds, per load.
pub fn over_seeds(args: Setup<'_>, each: &[Value]) -> Value {
    let policies = args.policies;
    let mut by_load = Map::new();
    for load in args.loads {
        let key = format!("{load}");
        let mut entry = Map::new();
        for base in ["soft", "soft_delay"] {
            let mut against = Map::new();
            for policy in policies.iter().filter(|p| **p != base) {
                let pairs: Vec<(f64, f64)> = (each.iter())
                    .filter_map(|s| {
                        let mean = |p: &str| s["loads"][&key][p]["mean_completion_s"].as_f64();
                        Some((mean(policy)?, mean(base)?))
                    })
                    .collect();
                let ratios = Ratios::of(&pairs);
                against.insert(
                    policy.to_string(),
                    Ratios::json(ratios.as_ref(), policy, base),
                );
            }
            entry.insert(format!("ratio_over_{base}"), Value::Object(against));
        }
        by_load.insert(key, Value::Object(entry));
    }
    let count = |f: &dyn Fn(&Value) -> bool| each.iter().filter(|s| f(s)).count();
    let top = args
        .loads
        .last()
        .map(|l| format!("{l}"))
        .unwrap_or_default();
    let mean_ratio =
        |load: &str, policy: &str| by_load[load]["ratio_over_soft"][policy]["ratio_mean"].as_f64();
    let on_average =
        |policy: &str| (by_load.keys()).all(|l| mean_ratio(l, policy).is_some_and(|r| r > 1.0));
    let top_ratio = mean_ratio(&top, "hard");
    let beats_both = on_average("none") && on_average("hard");
    json!({
        "first_seed": args.first_seed,
        "seeds": args.seeds,
        "jobs": args.jobs,
        "loads": Value::Object(by_load),
        "goal": {
            "seeds_where_soft_beats_none_and_hard_at_every_load":
                count(&|s| s["goal"]["soft_beats_none_and_hard_at_every_load"] == true),
            "seeds_where_soft_delay_beats_none_and_hard_at_every_load":
                count(&|s| s["goal"]["soft_delay_beats_none_and_hard_at_every_load"] == true),
            "seeds_where_soft_beats_hard_3x_at_highest_load":
                count(&|s| s["goal"]["soft_beats_hard_3x_at_highest_load"] == true),
            "on_average_soft_beats_none_and_hard_at_every_load":
                beats_both,
            "highest_load": args.loads.last(),
            "mean_hard_over_soft_at_highest_load": top_ratio,
            "on_average_soft_beats_hard_3x_at_highest_load": top_ratio.is_some_and(|r| r >= 3.0),
        },
    })
}

/// The comparison as a table, `policies` in order.
pub fn print_over_seeds(summary: &Value, policies: &[&str]) {
    println!("| load | policy | / soft: mean of ratios | 95% interval | soft faster on |");
    println!("| --- | --- | ---: | ---: | ---: |");
    let f = |v: &Value| v.as_f64().map_or("-".into(), |x| format!("{x:.3}"));
    if let Some(loads) = summary["loads"].as_object() {
        for (load, entry) in loads {
            for policy in policies.iter().filter(|p| **p != "soft") {
                let r = &entry["ratio_over_soft"][*policy];
                println!(
                    "| {load} | {policy} | {} | [{}, {}] | {} of {} seeds |",
                    f(&r["ratio_mean"]),
                    f(&r["ratio_ci95"][0]),
                    f(&r["ratio_ci95"][1]),
                    r["soft_better"],
                    r["seeds"]
                );
            }
        }
    }
    let g = &summary["goal"];
    println!(
        "soft beats none and hard at every load on {} of {} seeds (soft_delay on {}); hard / soft at {}: {} on average, 3x or more on {} seeds",
        g["seeds_where_soft_beats_none_and_hard_at_every_load"],
        summary["seeds"],
        g["seeds_where_soft_delay_beats_none_and_hard_at_every_load"],
        g["highest_load"],
        f(&g["mean_hard_over_soft_at_highest_load"]),
        g["seeds_where_soft_beats_hard_3x_at_highest_load"]
    );
}
