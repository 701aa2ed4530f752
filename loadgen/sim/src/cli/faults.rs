//! `loadgen faults`: seeded fault injection over small simulated clusters driven
//! through the real cores (see [`crate::sim::faults`]). Runs many seeds on threads and
//! prints the throughput and every violation with its seed; `--replay SEED` runs one
//! seed again, printing every event and the violation with its history. Exits
//! non-zero when an invariant broke.

use crate::sim::faults::{self, FaultConfig, Schedule};
use anyhow::{bail, Context, Result};
use clap::Args;
use common::Micros;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct FaultsArgs {
    /// How many seeds to run.
    #[arg(long, default_value_t = 1000)]
    pub seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 1)]
    pub first_seed: u64,
    /// Threads.
    #[arg(long, default_value_t = 2)]
    pub jobs: usize,
    /// Run this one seed again and print every event.
    #[arg(long)]
    pub replay: Option<u64>,
    /// A fault script (see `loadgen/sim/src/sim/faults/plan.rs`) instead of random faults.
    #[arg(long)]
    pub script: Option<PathBuf>,
    /// Print the faults of the schedule before the run (with --replay).
    #[arg(long)]
    pub show_schedule: bool,
    /// With --replay: drop faults while the same violation (strict) still happens,
    /// and print the smallest script found (a regression history).
    #[arg(long)]
    pub shrink: bool,
    /// Model the GM without its journal (`--data-dir`): queued tasks die with it.
    #[arg(long)]
    pub no_journal: bool,
    /// Model the LM without worker liveness (`--worker-timeout-ms`): a dead worker's tasks stay running at the LM.
    #[arg(long)]
    pub no_liveness: bool,
    /// Model workers that do not fence themselves (the LM's `--worker-fence false`): a worker cut off from its LM runs on.
    #[arg(long)]
    pub no_worker_fence: bool,
    /// How long a dead worker's task processes run on, ms (its tasks' helpers kill
    /// them when it dies: 50; before issue 31 they ran to their end: give e.g. 60000).
    #[arg(long, default_value_t = 50)]
    pub orphan_linger_ms: u64,
    /// Model a network whose abandoned orders never arrive: a start order in flight
    /// when its LM declared the worker lost is dropped (by default it may arrive
    /// late, after the network comes back).
    #[arg(long)]
    pub no_late_orders: bool,
    /// Model the worker before its order floor: it runs a late start order sent
    /// to an earlier registration of it (the compose over-commit of issue 31).
    #[arg(long)]
    pub no_order_floor: bool,
    /// Model the GM that does not ask a restarted LM which of its tasks it still holds (`--lm-reconcile-delay-ms`).
    #[arg(long)]
    pub no_lm_reconcile: bool,
    /// Count known causes (gaps of the roles modelled, bugs found and recorded) as violations.
    #[arg(long)]
    pub strict: bool,
    /// Model the GM before its batch-sequence fix (every life numbers batches from 1).
    #[arg(long)]
    pub batch_seq_from_zero: bool,
    /// Every third job of two tasks or more is a gang (docs/gangs.md): its tasks
    /// start together or not at all, checked at every gang commit.
    #[arg(long)]
    pub gangs: bool,
    #[arg(long, default_value_t = 2)]
    pub gms: u16,
    #[arg(long, default_value_t = 2)]
    pub lms: u16,
    /// Nodes per partition (one worker each); an LM has one partition per GM.
    #[arg(long, default_value_t = 1)]
    pub nodes: u16,
    /// Jobs per seed (1 to 3 tasks each).
    #[arg(long, default_value_t = 8)]
    pub tasks_jobs: u32,
    /// Task durations are drawn from 0.2 s to this many seconds. Longer than the
    /// worker timeout (10 s), a cut-off worker's runs may outlive their retries'
    /// starts (see --no-worker-fence); raise --quiet-s with it.
    #[arg(long, default_value_t = 3)]
    pub max_task_s: u64,
    /// Faults and arrivals happen in the first this many seconds.
    #[arg(long, default_value_t = 20)]
    pub horizon_s: u64,
    /// Then this many quiet seconds before liveness and views are checked.
    #[arg(long, default_value_t = 30)]
    pub quiet_s: u64,
    /// Runs of a task at most (the jobs' retry policy; 1: never retried).
    #[arg(long, default_value_t = 3)]
    pub attempts: u32,
    /// The GMs' doubt timeout (`doubt_timeout_s`): a call that may have been acted on
    /// is sent again until then, then its tasks go back to their queue.
    #[arg(long, default_value_t = 300)]
    pub doubt_timeout_s: u64,
    /// Per-message loss probability while faults last (also dup, delay, reorder).
    #[arg(long)]
    pub loss: Option<f64>,
    #[arg(long)]
    pub dup: Option<f64>,
    /// At most this many crash/restart pairs per seed (also partitions, skews...).
    #[arg(long)]
    pub crashes: Option<u32>,
    #[arg(long)]
    pub partitions: Option<u32>,
    #[arg(long)]
    pub skews: Option<u32>,
}

impl FaultsArgs {
    fn config(&self) -> Result<FaultConfig> {
        let mut c = FaultConfig {
            gms: self.gms,
            lms: self.lms,
            nodes_per_partition: self.nodes,
            jobs: self.tasks_jobs,
            horizon: Micros::from_secs(self.horizon_s),
            max_duration: Micros::from_secs(self.max_task_s),
            quiet: Micros::from_secs(self.quiet_s),
            doubt_timeout: Micros::from_secs(self.doubt_timeout_s),
            retry: common::retry::RetryPolicy {
                max_attempts: self.attempts,
                backoff: common::retry::Backoff::default(),
            },
            journal: !self.no_journal,
            worker_timeout: (!self.no_liveness).then(|| Micros::from_secs(10)),
            worker_fence: !self.no_worker_fence,
            orphan_linger: Micros::from_millis(self.orphan_linger_ms),
            late_orders: !self.no_late_orders,
            order_floor: !self.no_order_floor,
            lm_reconcile: (!self.no_lm_reconcile).then(|| Micros::from_secs(5)),
            strict: self.strict,
            batch_seq_from_zero: self.batch_seq_from_zero,
            gangs: self.gangs,
            ..FaultConfig::default()
        };
        if self.gms == 0 || self.lms == 0 || self.nodes == 0 {
            bail!("--gms, --lms and --nodes must be at least 1");
        }
        let most = common::retry::RetryPolicy::MAX_ATTEMPTS;
        if !(1..=most).contains(&self.attempts) {
            bail!("--attempts must be between 1 and {most}");
        }
        for (name, p) in [("--loss", self.loss), ("--dup", self.dup)] {
            if p.is_some_and(|p| !(0.0..=1.0).contains(&p)) {
                bail!("{name} must be a probability between 0 and 1");
            }
        }
        if let Some(p) = self.loss {
            c.rates.links.loss = p;
        }
        if let Some(p) = self.dup {
            c.rates.links.dup = p;
        }
        if let Some(n) = self.crashes {
            c.rates.crashes = n;
        }
        if let Some(n) = self.partitions {
            c.rates.partitions = n;
        }
        if let Some(n) = self.skews {
            c.rates.skews = n;
        }
        Ok(c)
    }
}

/// The known cause a strict violation names (`[known: ...]`), if any.
fn known_cause(detail: &str) -> Option<&str> {
    let at = detail.find("[known: ")?;
    Some(&detail[at..])
}

pub fn run(args: FaultsArgs) -> Result<()> {
    let mut config = args.config()?;
    let script = match &args.script {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read fault script {}", path.display()))?;
            let schedule = Schedule::parse(&text).with_context(|| path.display().to_string())?;
            let roles = faults::plan::Roles {
                gms: config.gms,
                lms: config.lms,
                workers: u32::from(config.lms)
                    * u32::from(config.gms)
                    * u32::from(config.nodes_per_partition),
            };
            if let Err(e) = schedule.check_roles(roles) {
                bail!("{}: {e}", path.display());
            }
            Some(schedule)
        }
        None => None,
    };
    if let (Some(seed), true) = (args.replay, args.shrink) {
        config.strict = true;
        let first = faults::run(seed, &config, script.as_ref());
        let Some(v) = first.violation else {
            bail!("seed {seed} breaks no invariant (strict): nothing to shrink");
        };
        let (invariant, cause) = (v.invariant, known_cause(&v.detail));
        let small = faults::shrink(seed, &config, &first.schedule, |r| {
            r.violation
                .as_ref()
                .is_some_and(|w| w.invariant == invariant && known_cause(&w.detail) == cause)
        });
        println!(
            "# seed {seed}: {invariant}{}",
            cause.map(|c| format!(" {c}")).unwrap_or_default()
        );
        let mut options = Vec::new();
        if args.no_journal {
            options.push("--no-journal");
        }
        if args.no_liveness {
            options.push("--no-liveness");
        }
        if args.no_worker_fence {
            options.push("--no-worker-fence");
        }
        if args.no_lm_reconcile {
            options.push("--no-lm-reconcile");
        }
        if args.batch_seq_from_zero {
            options.push("--batch-seq-from-zero");
        }
        if args.gangs {
            options.push("--gangs");
        }
        println!("# options: {}", options.join(" "));
        println!(
            "# replay: loadgen faults --replay {seed} --strict --script FILE {}",
            options.join(" ")
        );
        print!("{small}");
        return Ok(());
    }
    if let Some(seed) = args.replay {
        config.trace = true;
        println!("seed: {seed} (replay)");
        let report = faults::run(seed, &config, script.as_ref());
        if args.show_schedule || script.is_none() {
            println!("schedule:\n{}", report.schedule);
        }
        println!(
            "events {}, tasks accepted {}, finished {}, failed {}",
            report.events, report.accepted, report.finished, report.failed
        );
        if config.gangs {
            println!("gangs restarted whole: {}", report.gang_restarts);
        }
        for (k, n) in &report.known {
            println!("known: {n} task(s): {k}");
        }
        return match report.violation {
            Some(v) => {
                println!("{v}");
                bail!("seed {seed}: {}", v.invariant)
            }
            None => {
                println!("no violation");
                Ok(())
            }
        };
    }
    println!(
        "seeds {}..{} on {} thread(s), {} GMs x {} LMs x {} nodes per partition{}",
        args.first_seed,
        args.first_seed + args.seeds,
        args.jobs,
        config.gms,
        config.lms,
        config.nodes_per_partition,
        [
            (!config.journal, ", no GM journal"),
            (config.worker_timeout.is_none(), ", no worker liveness"),
            (!config.worker_fence, ", no worker fence"),
            (config.lm_reconcile.is_none(), ", no LM reconcile"),
        ]
        .iter()
        .filter(|(off, _)| *off)
        .map(|(_, s)| *s)
        .collect::<String>()
    );
    let report = faults::search(
        args.first_seed,
        args.seeds,
        args.jobs,
        &config,
        script.as_ref(),
    );
    for v in &report.violations {
        println!("{v}");
    }
    println!(
        "{} seeds in {:.2} s: {:.1} seeds/s ({} events, {:.0} events/s); tasks accepted {}, \
         finished {}, failed {}",
        report.seeds,
        report.elapsed.as_secs_f64(),
        report.seeds_per_second(),
        report.events,
        report.events as f64 / report.elapsed.as_secs_f64().max(1e-9),
        report.accepted,
        report.finished,
        report.failed
    );
    if config.gangs {
        println!(
            "gangs restarted whole (broken after their commit): {} in {} seed(s)",
            report.gang_restarts, report.seeds_with_gang_restarts
        );
    }
    for (k, (tasks, seeds, first)) in &report.known {
        println!("known: {tasks} task(s) in {seeds} seed(s), first seed {first}: {k}");
    }
    let mut by_kind = std::collections::BTreeMap::new();
    for v in &report.violations {
        by_kind
            .entry(v.invariant)
            .or_insert_with(Vec::new)
            .push(v.seed);
    }
    for (kind, seeds) in &by_kind {
        let shown: Vec<String> = seeds.iter().take(10).map(u64::to_string).collect();
        println!(
            "violations: {} x {kind}: seeds {}",
            seeds.len(),
            shown.join(" ")
        );
    }
    if report.violations.is_empty() {
        println!("no violation");
        Ok(())
    } else {
        bail!("{} seed(s) broke an invariant", report.violations.len())
    }
}
