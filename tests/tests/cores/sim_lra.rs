//! LRAs through the designated GM's real LRA path in the discrete-event simulator:
//! every container runs once, placed by the designated GM; with the ILP placer an
//! operator anti-affinity constraint holds at every moment (so LRAs that do not fit
//! wait for earlier ones to end); short jobs run alongside.

use common::{GmId, Micros, Resources, TaskId, TaskSpec};
use global_master::core::lra_path::LraPathConfig;
use global_master::lra::{IlpConfig, Placer};
use loadgen::sim::workload::Job;
use loadgen::sim::{run, SimConfig};
use tests::ClusterBuilder;

fn lra(job: u64, arrival_s: u64, containers: u32) -> Job {
    tests::sim::lra_job(job, arrival_s, containers, "w", |_| 30)
}

#[test]
fn lras_run_through_the_designated_gm_and_keep_their_anti_affinity() {
    // 2 GMs, 2 LMs, 3 nodes per partition: 12 nodes of 4 cores.
    let cluster = ClusterBuilder::new(2, 2, 3).capacity(4, 8192).build();
    // 5 LRAs of 4 one-core `w` containers: 20 containers, at most one per node.
    let mut jobs: Vec<Job> = (0..5).map(|k| lra(k, k, 4)).collect();
    jobs.push(Job {
        id: 5,
        dag: None,
        arrival: Micros::from_secs(1),
        tasks: vec![TaskSpec::short(
            TaskId::new(5, 0),
            Resources::cores(2, 512),
            Micros::from_secs(2),
        )],
    });
    // A generous solver cap: the ILP proves its optimum on this tiny problem long
    // before, so the run does not depend on the machine's speed.
    let ilp = Placer::Ilp(IlpConfig {
        time_limit_ms: 20_000,
        ..IlpConfig::default()
    });
    for (placer, kind) in [("ilp", ilp), ("nc", Placer::NodeCandidates)] {
        let config = SimConfig {
            lra: tests::sim::lra_path(kind, 10),
            lra_operator_constraints: tests::sim::w_anti_affinity(),
            ..SimConfig::default()
        };
        let outcome = run(&cluster, &jobs, &config, &mut |_, _| {});
        assert!(outcome.drained, "{placer}: resources leaked");
        let records = &outcome.records;
        assert_eq!(records.len(), 21);
        for r in records {
            assert!(
                r.finish.is_some(),
                "{placer}: {}.{} never finished",
                r.job,
                r.index
            );
            assert_eq!(
                r.starts, 1,
                "{placer}: {}.{} started {} times",
                r.job, r.index, r.starts
            );
        }
        let w: Vec<_> = records.iter().filter(|r| r.job < 5).collect();
        assert!(
            w.iter().all(|r| r.gm == Some(GmId(0))),
            "{placer}: placed by GM 0"
        );
        if placer != "ilp" {
            // The heuristics treat constraints as soft: best effort, not asserted.
            continue;
        }
        // At most one `w` container per node at any moment.
        for (i, a) in w.iter().enumerate() {
            for b in &w[i + 1..] {
                if (a.lm, a.node) != (b.lm, b.node) {
                    continue;
                }
                let (sa, fa) = (a.start.expect("start"), a.finish.expect("finish"));
                let (sb, fb) = (b.start.expect("start"), b.finish.expect("finish"));
                assert!(
                    fa <= sb || fb <= sa,
                    "{placer}: {}.{} and {}.{} share {:?} at once",
                    a.job,
                    a.index,
                    b.job,
                    b.index,
                    a.node
                );
            }
        }
        // Twenty containers on twelve nodes: some LRA waited for others to end.
        let first_end = w.iter().filter_map(|r| r.finish).min().expect("finishes");
        assert!(
            w.iter().any(|r| r.start.expect("start") >= first_end),
            "{placer}"
        );
    }
}

#[test]
fn an_lra_that_can_never_fit_ends_the_run_reported_and_the_rest_runs() {
    let cluster = ClusterBuilder::new(1, 1, 4).capacity(4, 8192).build();
    let mut jobs = vec![lra(0, 0, 2), lra(1, 1, 1)];
    // Eight cores: no node has them.
    jobs[1].tasks[0].resources = Resources::cores(8, 512);
    let config = SimConfig {
        lra: LraPathConfig {
            interval: Micros::from_secs(10),
            placer: Placer::NodeCandidates,
            nodes_per_rack: 0,
            groups: Default::default(),
        },
        ..SimConfig::default()
    };
    let outcome = run(&cluster, &jobs, &config, &mut |_, _| {});
    let finished = |job: u64| {
        outcome
            .records
            .iter()
            .filter(|r| r.job == job)
            .all(|r| r.finish.is_some())
    };
    assert!(finished(0));
    assert!(!finished(1));
    assert!(outcome.drained);
}
