//! The TPC-H DAG workload (`--format tpch`) on a hand-written fixture and on the real
//! file: stages, edges and tasks; seeded draws; filters and arrivals; validation
//! errors naming the file, DAG and field; the DAG lines of `trace stats`.

#![allow(clippy::unwrap_used)] // tests may unwrap

use common::{Micros, Resources};
use loadgen::trace::stats::{write_table, TraceStats};
use loadgen::trace::tpch::{
    read_dags, Arrivals, TpchConfig, TpchDag, TpchSource, CPU_CORES, GIB_PER_CORE,
};
use loadgen::trace::{open_trace, SourceConfig, TraceError, TraceFormat, TraceJob};
use std::path::{Path, PathBuf};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tpch_dags.json")
}

/// The real file: `MEGHA_TPCH_DAGS`, or the bundled `data/tpch/tpch-dags.json.gz`
/// (gzipped: 2.5 MB instead of 9.7).
fn real_file() -> PathBuf {
    match std::env::var_os("MEGHA_TPCH_DAGS") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/tpch/tpch-dags.json.gz"),
    }
}

fn config(jobs: u64, seed: u64) -> TpchConfig {
    TpchConfig {
        jobs,
        seed,
        ..TpchConfig::default()
    }
}

fn draw(path: &Path, cfg: TpchConfig) -> Vec<TraceJob> {
    TpchSource::open(path, cfg)
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn ms(v: &[u64]) -> Vec<Micros> {
    v.iter().map(|&m| Micros(m * 1000)).collect()
}

#[test]
fn fixture_reads_stages_edges_and_tasks() {
    let dags = read_dags(&fixture()).unwrap();
    let names: Vec<&str> = dags.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["chain-2g-q1", "diamond-2g-q2", "wide-5g-q1"]);
    let diamond = &dags[1];
    assert_eq!((diamond.scale.as_str(), diamond.query), ("2g", 2));
    let shape: Vec<(u32, &str, Vec<u32>, u32)> = diamond
        .stages
        .iter()
        .map(|s| {
            (
                s.dag.id,
                s.dag.name.as_str(),
                s.dag.depends_on.clone(),
                s.tasks,
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            (0, "s0", vec![], 2),
            (1, "s1", vec![0], 4),
            (2, "s2", vec![0], 3),
            (3, "s3", vec![1, 2], 1),
        ]
    );
    assert_eq!(diamond.stages[1].first_wave, ms(&[2000, 2001]));
    assert_eq!(diamond.stages[1].fresh, ms(&[5]));
    assert!(diamond.stages[1].rest_wave.is_empty());
}

/// The DAG a job was drawn from, recognised by its stage count and first stage's size.
fn dag_of<'a>(dags: &'a [TpchDag], job: &TraceJob) -> &'a TpchDag {
    let sizes = |j: &TraceJob| j.tasks.len() as u32;
    dags.iter()
        .find(|d| d.stages.iter().map(|s| s.tasks).sum::<u32>() == sizes(job))
        .unwrap()
}

#[test]
fn jobs_carry_the_dag_and_draw_durations_and_shapes_by_the_documented_rules() {
    let dags = read_dags(&fixture()).unwrap();
    let mut source = TpchSource::open(&fixture(), config(60, 5)).unwrap();
    let jobs: Vec<TraceJob> = source.by_ref().map(Result::unwrap).collect();
    assert_eq!(jobs.len(), 60);
    assert_eq!(source.report().jobs, 60);
    assert!(
        source.report().mappings[0].contains("seed 5"),
        "{:?}",
        source.report()
    );
    let mut seen = std::collections::BTreeSet::new();
    for (i, job) in jobs.iter().enumerate() {
        assert_eq!(job.id, i as u64);
        let dag = dag_of(&dags, job);
        assert_eq!(source.dag_of(job.id), Some(dag.name.as_str()));
        seen.insert(dag.name.clone());
        let stages: Vec<_> = dag.stages.iter().map(|s| s.dag.clone()).collect();
        assert_eq!(job.stages, stages);
        for stage in &dag.stages {
            let tasks: Vec<_> = job
                .tasks
                .iter()
                .filter(|t| t.stage == Some(stage.dag.id))
                .collect();
            assert_eq!(tasks.len() as u32, stage.tasks, "{}", dag.name);
            // One shape per stage, from the documented tables.
            let shape = tasks[0].resources.unwrap();
            let cores = shape.cpu_millis / 1000;
            assert!(CPU_CORES.iter().any(|&(c, _)| c == cores), "{shape:?}");
            let per_core = shape.memory_mb / 1024 / cores;
            assert!(
                GIB_PER_CORE.iter().any(|&(g, _)| g == per_core),
                "{shape:?}"
            );
            assert_eq!(shape, Resources::new(cores * 1000, cores * per_core * 1024));
            let root = stage.dag.depends_on.is_empty();
            for (k, t) in tasks.iter().enumerate() {
                assert_eq!(t.resources, Some(shape));
                let expected = match (k < 40, root) {
                    (true, true) => stage.fresh_or_first(),
                    (true, false) => &stage.first_wave[..],
                    (false, _) => stage.rest_or_first(),
                };
                assert!(expected.contains(&t.duration), "{} task {k}", dag.name);
            }
        }
    }
    assert_eq!(seen.len(), 3, "60 uniform draws over 3 DAGs hit each");
    assert_eq!(jobs[0].arrival, Micros::ZERO);
    assert!(jobs.windows(2).all(|w| w[0].arrival <= w[1].arrival));
}

#[test]
fn same_seed_same_jobs_other_seed_other_draws() {
    let a = draw(&fixture(), config(40, 9));
    let b = draw(&fixture(), config(40, 9));
    let c = draw(&fixture(), config(40, 10));
    assert_eq!(a, b);
    assert_ne!(a, c);
    let arrivals = |jobs: &[TraceJob]| jobs.iter().map(|j| j.arrival).collect::<Vec<_>>();
    assert_ne!(arrivals(&a), arrivals(&c));
}

#[test]
fn filters_keep_their_dags_and_refuse_unknown_ones() {
    let five_g = TpchConfig {
        sizes: vec!["5g".into()],
        ..config(10, 1)
    };
    assert!(draw(&fixture(), five_g).iter().all(|j| j.tasks.len() == 50));
    let q2 = TpchConfig {
        queries: vec![2],
        ..config(10, 1)
    };
    assert!(draw(&fixture(), q2).iter().all(|j| j.stages.len() == 4));
    let unknown = TpchConfig {
        sizes: vec!["3g".into()],
        ..config(10, 1)
    };
    let err = TpchSource::open(&fixture(), unknown)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--tpch-sizes: no DAG of size 3g (the file has 2g, 5g)"),
        "{err}"
    );
    let none = TpchConfig {
        sizes: vec!["5g".into()],
        queries: vec![2],
        ..config(10, 1)
    };
    let err = TpchSource::open(&fixture(), none).unwrap_err().to_string();
    assert!(err.contains("no DAG has both"), "{err}");
}

#[test]
fn arrivals_follow_the_mean_gap_or_the_load_factor() {
    let gap = |arrivals| {
        let cfg = TpchConfig {
            arrivals,
            ..config(1, 1)
        };
        TpchSource::open(&fixture(), cfg).unwrap().mean_gap()
    };
    assert_eq!(
        gap(Arrivals::MeanGap(Micros::from_secs(7))),
        Micros::from_secs(7)
    );
    let load = |factor| Arrivals::Load {
        factor,
        cluster_cores: 10,
    };
    // Expected core-seconds per job (40-task first wave, mean 1.9 cores):
    // chain 1.9 x (3 x 0.1005 + 2 x 0.4005), diamond 1.9 x (2 x 1 + 4 x 2.0005 + 3 x 3 + 4),
    // wide 1.9 x (40 x 0.1005 + 10 x 0.3005); their mean over 10 cores at load 1.
    let work = 1.9 * ((0.3015 + 0.801) + (2.0 + 8.002 + 9.0 + 4.0) + (4.02 + 3.005)) / 3.0;
    let one = gap(load(1.0)).as_secs_f64();
    assert!((one - work / 10.0).abs() < 1e-5, "{one} vs {}", work / 10.0);
    let four = gap(load(4.0)).as_secs_f64();
    assert!((one / four - 4.0).abs() < 1e-3, "{one} / {four}");
    // Over many jobs the mean gap is the one asked for (standard error 20/sqrt(4000)).
    let jobs = draw(&fixture(), config(4001, 3));
    let mean = jobs[4000].arrival.as_secs_f64() / 4000.0;
    assert!((mean - 20.0).abs() < 1.5, "{mean}");
}

/// A change to the fixture's JSON.
type Edit = Box<dyn FnOnce(&mut serde_json::Value)>;

/// Writes the fixture with `edit` applied to its JSON, returns the file's error.
fn error_after(edit: impl FnOnce(&mut serde_json::Value)) -> (String, TraceError) {
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture()).unwrap()).unwrap();
    edit(&mut json);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.json");
    std::fs::write(&path, serde_json::to_string_pretty(&json).unwrap()).unwrap();
    let err = read_dags(&path).unwrap_err();
    (path.display().to_string(), err)
}

#[test]
fn invalid_dags_are_errors_naming_file_dag_and_field() {
    let diamond = |json: &mut serde_json::Value| -> serde_json::Value { json["queries"][1].take() };
    let cases: Vec<(Edit, &str)> = vec![
        (
            Box::new(|j: &mut serde_json::Value| {
                j["queries"][1]["edges"][0] = serde_json::json!([3, 0])
            }),
            "DAG `diamond-2g-q2`: field `edges`: the edges make a cycle: 2 -> 3 -> 0 -> 2",
        ),
        (
            Box::new(|j: &mut serde_json::Value| {
                j["queries"][1]["edges"][2] = serde_json::json!([1, 9])
            }),
            "DAG `diamond-2g-q2`: field `edges[2]`: names stage 9, which the DAG does not have",
        ),
        (
            Box::new(|j: &mut serde_json::Value| {
                j["queries"][1]["edges"][1] = serde_json::json!([2, 2])
            }),
            "DAG `diamond-2g-q2`: field `edges[1]`: stage 2 depends on itself",
        ),
        (
            Box::new(|j: &mut serde_json::Value| {
                j["queries"][1]["edges"][3] = serde_json::json!([0, 1])
            }),
            "DAG `diamond-2g-q2`: field `edges[3]`: edge [0, 1] is listed twice",
        ),
        (
            Box::new(|j: &mut serde_json::Value| {
                j["queries"][1]["stages"][2]["tasks"] = serde_json::json!(0)
            }),
            "DAG `diamond-2g-q2`: field `stages[2].tasks`: a stage needs at least 1 task",
        ),
        (
            Box::new(|j: &mut serde_json::Value| {
                j["queries"][1]["stages"][3]["stage"] = serde_json::json!(1)
            }),
            "DAG `diamond-2g-q2`: field `stages[3].stage`: stage id 1 is used by an earlier stage",
        ),
        (
            Box::new(|j: &mut serde_json::Value| {
                j["queries"][0]["stages"][1]["first_wave_ms"] = serde_json::json!([])
            }),
            "DAG `chain-2g-q1`: field `stages[1].first_wave_ms`: no first-wave durations",
        ),
        (
            Box::new(|j: &mut serde_json::Value| {
                j["queries"][2]["stages"][0]["rest_wave_ms"][1] = serde_json::json!(-4.0)
            }),
            "DAG `wide-5g-q1`: field `stages[0].rest_wave_ms[1]`: -4 is not a duration",
        ),
        (
            Box::new(|j: &mut serde_json::Value| j["queries"][2]["stages"] = serde_json::json!([])),
            "DAG `wide-5g-q1`: field `stages`: a DAG needs at least one stage",
        ),
        (
            Box::new(move |j: &mut serde_json::Value| {
                let d = diamond(j);
                j["queries"][1] = d.clone();
                j["queries"][2] = d;
            }),
            "DAG `diamond-2g-q2`: field `name`: another DAG of the file has this name",
        ),
    ];
    for (edit, expected) in cases {
        let (path, err) = error_after(edit);
        assert!(matches!(err, TraceError::Dag { .. }), "{err:?}");
        let text = err.to_string();
        assert!(text.starts_with(&format!("{path}: ")), "{text}");
        assert!(text.contains(expected), "{text}\n  expected: {expected}");
    }
}

#[test]
fn malformed_json_names_line_and_path() {
    let (path, err) =
        error_after(|j| j["queries"][1]["stages"][2]["tasks"] = serde_json::json!(-1));
    let text = err.to_string();
    let TraceError::Parse { line, field, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(field, "queries[1].stages[2].tasks");
    assert!(*line > 1, "pretty-printed: the line of the value, {line}");
    assert!(
        text.starts_with(&format!(
            "{path}:{line}: field `queries[1].stages[2].tasks`: "
        )),
        "{text}"
    );
    let (_, err) = error_after(|j| j["queries"] = serde_json::json!([]));
    assert!(
        err.to_string()
            .contains("field `queries`: the file has no DAGs"),
        "{err}"
    );
    let (_, err) = error_after(|j| j["queries"][0]["edges"][0] = serde_json::json!([0]));
    assert!(
        err.to_string().contains("field `queries[0].edges[0]`"),
        "{err}"
    );
    let missing = TpchSource::open(Path::new("/nonexistent/tpch.json"), config(1, 1)).unwrap_err();
    assert!(matches!(missing, TraceError::Io { .. }), "{missing:?}");
}

#[test]
fn open_trace_reads_the_format_and_stats_print_dag_lines() {
    let cfg = SourceConfig {
        tpch: config(12, 4),
        ..SourceConfig::default()
    };
    let mut source = open_trace(&fixture(), TraceFormat::Tpch, &cfg).unwrap();
    let mut stats = TraceStats::new(Micros::from_secs(60), None);
    for job in source.by_ref() {
        stats.add(&job.unwrap()).unwrap();
    }
    assert_eq!(source.report().jobs, 12);
    assert_eq!(stats.dags.dags, 12);
    let mut out = Vec::new();
    write_table(&stats, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    for line in [
        "DAG jobs             12",
        "stages per DAG",
        "critical path (s)",
        "work (task-s)",
    ] {
        assert!(text.contains(line), "{line}\n{text}");
    }
}

#[test]
fn the_real_file_reads_whole() {
    let path = real_file();
    assert!(
        path.exists(),
        "the TPC-H DAGs are not at {} (set MEGHA_TPCH_DAGS to their path)",
        path.display()
    );
    let dags = read_dags(&path).unwrap();
    assert_eq!(dags.len(), 154);
    let mut sizes: Vec<&str> = dags.iter().map(|d| d.scale.as_str()).collect();
    sizes.sort_unstable();
    sizes.dedup();
    assert_eq!(sizes, ["100g", "10g", "20g", "2g", "50g", "5g", "80g"]);
    let mut stages: Vec<usize> = dags.iter().map(|d| d.stages.len()).collect();
    let mut tasks: Vec<u32> = dags
        .iter()
        .map(|d| d.stages.iter().map(|s| s.tasks).sum())
        .collect();
    stages.sort_unstable();
    tasks.sort_unstable();
    // The README: medians 8 stages and about 1,000 tasks; at most 18 and 3,717.
    assert_eq!((stages[76], stages[77], stages[153]), (8, 8, 18));
    assert!((950..=1050).contains(&tasks[77]), "{}", tasks[77]);
    assert_eq!(tasks[153], 3717);
    // A default draw: 250 jobs whose stats agree with the pool's shape.
    let cfg = SourceConfig {
        tpch: config(250, 42),
        ..SourceConfig::default()
    };
    let mut stats = TraceStats::new(Micros::from_secs(60), None);
    for job in open_trace(&path, TraceFormat::Tpch, &cfg).unwrap() {
        stats.add(&job.unwrap()).unwrap();
    }
    assert_eq!(stats.dags.dags, 250);
    assert_eq!(stats.dags.unordered, 0);
    assert!(stats.dags.stages.max() <= 18);
    assert!((5..=10).contains(&stats.dags.stages.quantile(0.5)));
}

/// Draws from the fixture run in the simulator with their DAGs: every task of a
/// stage starts after the last task of each parent stage finished (the reader's
/// stages, as `workload::build` hands them to the GM core).
#[test]
fn drawn_dags_run_their_stages_in_order_in_the_simulator() {
    use common::cluster::{ClusterSpec, LmSpec, NodeSpec};
    use common::{ConstraintSet, LmId};
    use loadgen::sim::workload::{self, ConstraintMode, WorkloadOptions};
    use loadgen::sim::{run, SchedulerKind, SimConfig};

    let cfg = TpchConfig {
        arrivals: Arrivals::MeanGap(Micros::from_millis(300)),
        ..config(24, 8)
    };
    let trace = draw(&fixture(), cfg);
    let options = WorkloadOptions {
        default_task: Resources::cores(1, 1024),
        constraints: ConstraintMode::None,
        seed: 8,
    };
    let jobs = workload::build(&trace, &options);
    assert!(
        jobs.iter().all(|j| j.dag.is_some()),
        "every drawn job keeps its DAG"
    );
    let node = NodeSpec {
        capacity: Resources::cores(8, 64 * 1024),
        constraints: ConstraintSet::EMPTY,
    };
    let cluster = ClusterSpec {
        gms: 2,
        lms: (0..2)
            .map(|l| LmSpec {
                id: LmId(l),
                partitions: vec![vec![node; 3]; 2],
            })
            .collect(),
    };
    for scheduler in [SchedulerKind::Megha, SchedulerKind::Centralized] {
        let config = SimConfig {
            scheduler,
            ..SimConfig::default()
        };
        let outcome = run(&cluster, &jobs, &config, &mut |_, _| {});
        let total: usize = jobs.iter().map(|j| j.tasks.len()).sum();
        assert_eq!(outcome.records.len(), total, "{scheduler:?}");
        let mut checked = 0;
        for job in &trace {
            let stage_of = |index: u32| job.tasks[index as usize].stage;
            let records: Vec<_> = outcome.records.iter().filter(|r| r.job == job.id).collect();
            for child in &records {
                let start = child.start.expect("every task started");
                let stage = job
                    .stages
                    .iter()
                    .find(|s| Some(s.id) == stage_of(child.index));
                for &parent in &stage.unwrap().depends_on {
                    for p in records.iter().filter(|r| stage_of(r.index) == Some(parent)) {
                        let finish = p.finish.expect("every task finished");
                        assert!(
                            start >= finish,
                            "{scheduler:?}: job {} task {} started at {start:?}, before task {} of its parent stage {parent} finished at {finish:?}",
                            job.id, child.index, p.index
                        );
                        checked += 1;
                    }
                }
            }
        }
        assert!(
            checked > 100,
            "{scheduler:?}: only {checked} parent-child pairs"
        );
    }
}
