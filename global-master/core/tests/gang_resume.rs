//! A GM restarted after a partial commit (docs/gangs.md, "A GM restarted
//! mid-commit"; fault seed 8097 of issue 37): its earlier life sent the commits of
//! a gang on four LMs, two of them arrived, and it died before it could stop
//! them. The restarted GM resumes the gang from its journal, finds half of it held
//! by LMs, and restarts it whole. Over the pure cores, every message moved by hand.

mod gang_world;

use common::gang::ANY_GENERATION;
use gang_world::*;
use gm_core::Resumed;

/// The commits of generation 1 of a gang of 8 on the four LMs (two members each).
fn committing(w: &mut World) -> Vec<GmToLm> {
    w.gm.step(Micros(1), GmInput::Client(gang_of(1, 8)));
    let out = w.gm.step(Micros(2), GmInput::Schedule);
    let mut answers = Vec::new();
    for m in out.to_lms {
        answers.extend(w.deliver(Micros(3), m));
    }
    let commits: Vec<GmToLm> = (answers.into_iter())
        .flat_map(|a| w.gm.step(Micros(3), GmInput::Lm(a)).to_lms)
        .collect();
    assert_eq!(gang_ops_of(&commits, "commit").len(), LMS as usize);
    commits
}

/// GM 0's second life, its view taken from the LMs.
fn restarted_gm(w: &mut World) -> GlobalMaster {
    let mut config = GmConfig::new(GmId(0), 1, LMS);
    config.life = 2;
    let mut gm = GlobalMaster::new(config);
    gm.set_gang_config(GangConfig {
        hold_for: HOLD,
        retry_after: Micros(1_000),
        restart_after: RESTART,
    });
    for lm in &mut w.lms {
        gm.step(
            Micros(10),
            GmInput::Lm(LmToGm::State(lm.snapshot(Micros(10)))),
        );
    }
    gm
}

#[test]
fn a_gm_restarted_after_a_partial_commit_restarts_the_gang_whole() {
    let mut w = world();
    let commits = committing(&mut w);
    // Only LMs 0 and 1 get their commit; the GM dies.
    for m in commits.into_iter().filter(|m| m.lm().index() < 2) {
        w.deliver(Micros(4), m);
    }
    assert_eq!(w.launched.len(), 4, "half of the gang runs");
    let held: Vec<TaskSpec> = (w.lms[..2].iter())
        .flat_map(|lm| lm.running().values().map(|a| a.task.clone()))
        .collect();
    assert!(held.iter().all(|t| t.attempt == 1));
    // LMs 2 and 3 still hold their parts (the hold has not expired).
    assert_eq!(w.lms[2].gang_holds() + w.lms[3].gang_holds(), 2);
    // The restarted GM: the LMs hold four members (the reconcile's answer); the
    // other four go out again as their next run.
    w.gm = restarted_gm(&mut w);
    let again: Vec<(TaskSpec, u32)> = (0..8)
        .map(|i| TaskId::new(1, i))
        .filter(|id| !held.iter().any(|t| t.id == *id))
        .map(|id| {
            let mut t = TaskSpec::short(id, Resources::cores(1, 100), Micros(1_000_000));
            t.attempt = 2;
            (t, 0)
        })
        .collect();
    let resume = Resumed {
        tasks: again,
        held: held.iter().map(|t| (t.clone(), 0)).collect(),
        retry: RetryPolicy::default(),
        dags: Vec::new(),
        gangs: vec![(common::JobId(1), GangSpec::all(8, Micros(600_000_000)))],
    };
    let out = w.gm.step(Micros(11), GmInput::Resume(resume));
    assert_eq!(out.gangs_restarted.len(), 1, "restarted whole");
    let (job, members) = &out.gangs_restarted[0];
    assert_eq!(*job, common::JobId(1));
    assert_eq!(members.len(), 8);
    assert!(
        members.iter().all(|(_, run)| *run == 2),
        "every member runs next as run 2: {members:?}"
    );
    let stops = gang_ops_of(&out.to_lms, "stop");
    assert_eq!(stops.len(), LMS as usize, "a stop to every LM: {stops:?}");
    assert!(stops.iter().all(|(_, g)| *g == ANY_GENERATION));
    assert!(
        gang_ops_of(&out.to_lms, "reserve").is_empty(),
        "nothing reserved before the stops are answered"
    );
    w.run(Micros(12), out.to_lms);
    let mut killed: Vec<TaskId> = w.kills.iter().map(|k| k.0).collect();
    killed.sort();
    let mut running: Vec<TaskId> = held.iter().map(|t| t.id).collect();
    running.sort();
    assert_eq!(killed, running, "the members that ran are stopped");
    assert!(w.lms.iter().all(|lm| lm.running().is_empty()));
    assert!(
        w.lms.iter().all(|lm| lm.gang_holds() == 0),
        "holds given back"
    );
    // The end of a stopped run that finished before its kill is void.
    let void = common::messages::TaskEnd::finished(held[0].id, 1, NodeId(0), Micros(12));
    let ended = LmToGm::Ended(common::messages::TasksEnded {
        lm: LmId(0),
        gm: GmId(0),
        ends: vec![void],
        publish: common::messages::EndsPublished::ByLm,
    });
    assert!(w.gm.step(Micros(13), GmInput::Lm(ended)).ended.is_empty());
    // The kills confirmed, and `restart_after` later: every member starts
    // together, each once, as run 2.
    workers_confirm_kills(&mut w, Micros(13));
    let before = w.launched.len();
    let at = Micros(12) + RESTART;
    let mut to_lms = w.gm.step(at, GmInput::Tick).to_lms;
    to_lms.extend(w.gm.step(at, GmInput::Schedule).to_lms);
    assert!(!gang_ops_of(&to_lms, "reserve").is_empty());
    w.run(at, to_lms);
    let launched: BTreeSet<TaskId> = w.launched[before..].iter().copied().collect();
    assert_eq!(
        (launched.len(), w.launched.len() - before),
        (8, 8),
        "every member launched once: {:?}",
        &w.launched[before..]
    );
    for lm in &w.lms {
        assert!(lm.running().values().all(|a| a.task.attempt == 2));
    }
    assert!(w.gm.gangs().is_empty(), "started");
}

/// A gang none of whose members an LM holds resumes as a gang, as before (no
/// stop is sent).
#[test]
fn a_gang_that_had_not_started_resumes_as_a_gang_without_stops() {
    let mut w = world();
    w.gm = restarted_gm(&mut w);
    let tasks: Vec<(TaskSpec, u32)> = (0..4)
        .map(|i| {
            let mut t = TaskSpec::short(
                TaskId::new(1, i),
                Resources::cores(1, 100),
                Micros(1_000_000),
            );
            t.attempt = 2;
            (t, 0)
        })
        .collect();
    let resume = Resumed {
        tasks,
        held: Vec::new(),
        retry: RetryPolicy::default(),
        dags: Vec::new(),
        gangs: vec![(common::JobId(1), GangSpec::all(4, Micros(600_000_000)))],
    };
    let out = w.gm.step(Micros(11), GmInput::Resume(resume));
    assert!(out.gangs_restarted.is_empty());
    assert!(gang_ops_of(&out.to_lms, "stop").is_empty());
    let out = w.gm.step(Micros(12), GmInput::Schedule);
    let reserves = gang_ops_of(&out.to_lms, "reserve");
    assert!(!reserves.is_empty() && reserves.iter().all(|(_, g)| *g == 1));
}
