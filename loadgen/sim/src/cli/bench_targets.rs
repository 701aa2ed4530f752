//! Which targets of `loadgen bench` hold (docs/simulator-performance.md): the lines
//! printed at the end of a bench, from its measured runs.

/// One measured run, as the targets need it.
#[derive(Clone, Debug)]
pub struct MeasuredRun {
    pub series: String,
    /// The run's name (`yh1-10k/indexed`, `overload-10000-50k/all`, ...).
    pub name: String,
    pub wake: Option<String>,
    pub tasks: f64,
    pub wall: f64,
    pub cpu: f64,
    pub peak_mib: f64,
    /// The baseline build's CPU seconds on the same run (`--baseline`).
    pub baseline_cpu: Option<f64>,
}

impl MeasuredRun {
    /// The run's name without its rule.
    fn base(&self) -> &str {
        self.name.split('/').next().unwrap_or(&self.name)
    }

    /// Under our rule (indexed, the default).
    fn ours(&self) -> bool {
        self.wake.as_deref().is_none_or(|w| w == "indexed")
    }
}

fn verdict(holds: bool) -> &'static str {
    if holds {
        "holds"
    } else {
        "does NOT hold"
    }
}

/// One line per target that the measured runs allow to judge.
pub fn report(runs: &[MeasuredRun]) -> Vec<String> {
    let mut lines = Vec::new();
    let ours = |base: &str| runs.iter().find(|r| r.base() == base && r.ours());
    for (base, limit) in [("yh1-10k", 0.2), ("yh1-1k-overloaded", 2.0)] {
        if let Some(r) = ours(base) {
            lines.push(format!(
                "{base} (indexed) <= {limit} s wall: {} ({:.2} s)",
                verdict(r.wall <= limit),
                r.wall
            ));
        }
    }
    let overload: Vec<&MeasuredRun> = runs.iter().filter(|r| r.series == "overload").collect();
    if let Some(r) = overload.iter().find(|r| r.ours() && r.tasks >= 1e6) {
        lines.push(format!(
            "{} (indexed) <= 10 s wall, <= 1 GiB: {} ({:.2} s, {:.0} MiB)",
            r.base(),
            verdict(r.wall <= 10.0 && r.peak_mib <= 1024.0),
            r.wall,
            r.peak_mib
        ));
    }
    // Growth per rule: at most linear (the CPU factor at most the task factor).
    let mut rules: Vec<Option<String>> = Vec::new();
    for r in &overload {
        if !rules.contains(&r.wake) {
            rules.push(r.wake.clone());
        }
    }
    for rule in rules {
        let series: Vec<&&MeasuredRun> = overload.iter().filter(|r| r.wake == rule).collect();
        let (Some(first), Some(last)) = (series.first(), series.last()) else {
            continue;
        };
        if series.len() < 2 {
            continue;
        }
        let (tasks, cpu) = (last.tasks / first.tasks, last.cpu / first.cpu);
        lines.push(format!(
            "overload growth ({}) at most linear: {} (x{tasks:.0} tasks: x{cpu:.1} cpu)",
            rule.as_deref().unwrap_or("default"),
            verdict(cpu <= tasks)
        ));
    }
    // The peer's rule against the baseline build on the overloaded runs.
    let overloaded = |r: &&MeasuredRun| r.series == "overload" || r.base().contains("overloaded");
    for r in runs.iter().filter(overloaded) {
        if let (Some("all"), Some(before)) = (r.wake.as_deref(), r.baseline_cpu) {
            lines.push(format!(
                "{} (all) >= 5x less CPU than the baseline: {} (x{:.1}: {before:.2} -> {:.2} s)",
                r.base(),
                verdict(r.cpu * 5.0 <= before),
                before / r.cpu,
                r.cpu
            ));
        }
    }
    if lines.is_empty() {
        lines.push("no run of a target measured".to_owned());
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(series: &str, name: &str, wake: &str, tasks: f64, cpu: f64) -> MeasuredRun {
        MeasuredRun {
            series: series.into(),
            name: format!("{name}/{wake}"),
            wake: Some(wake.into()),
            tasks,
            wall: cpu,
            cpu,
            peak_mib: 100.0,
            baseline_cpu: (wake == "all").then_some(10.0 * cpu),
        }
    }

    #[test]
    fn targets_are_judged_per_rule() {
        let runs = [
            run("yh1", "yh1-10k", "indexed", 1.0, 0.3),
            run("yh1", "yh1-1k-overloaded", "indexed", 1.0, 1.5),
            run("yh1", "yh1-1k-overloaded", "all", 1.0, 3.0),
            // As the bench runs them: each size under both rules in turn.
            run("overload", "overload-10000-50k", "indexed", 1e4, 0.1),
            run("overload", "overload-10000-50k", "all", 1e4, 1.0),
            run("overload", "overload-1000000-50k", "indexed", 1e6, 9.0),
            run("overload", "overload-1000000-50k", "all", 1e6, 300.0),
        ];
        let lines = report(&runs);
        let want = [
            "yh1-10k (indexed) <= 0.2 s wall: does NOT hold (0.30 s)",
            "yh1-1k-overloaded (indexed) <= 2 s wall: holds (1.50 s)",
            "overload-1000000-50k (indexed) <= 10 s wall, <= 1 GiB: holds (9.00 s, 100 MiB)",
            "overload growth (indexed) at most linear: holds (x100 tasks: x90.0 cpu)",
            "overload growth (all) at most linear: does NOT hold (x100 tasks: x300.0 cpu)",
            "yh1-1k-overloaded (all) >= 5x less CPU than the baseline: holds (x10.0: 30.00 -> 3.00 s)",
        ];
        for line in want {
            let count = lines.iter().filter(|l| *l == line).count();
            assert_eq!(count, 1, "{line:?} in {lines:#?}");
        }
        assert_eq!(report(&[]), vec!["no run of a target measured".to_owned()]);
    }
}
