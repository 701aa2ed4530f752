//! Gangs broken after their commit are restarted whole (`docs/gangs.md`, "Restart
//! whole"): the two cases the fault search found. Over the pure cores, every
//! message moved by hand; starts and kills are read from the LMs' events and
//! worker orders.

mod gang_world;

use gang_world::*;

/// Delivers each message, then the GM's reaction to each answer, once (no loop):
/// the GM's outputs of that round.
fn round(w: &mut World, now: Micros, to_lms: Vec<GmToLm>) -> Vec<GmOutput> {
    let mut answers = Vec::new();
    for m in to_lms {
        answers.extend(w.deliver(now, m));
    }
    (answers.into_iter())
        .map(|a| w.gm.step(now, GmInput::Lm(a)))
        .collect()
}

/// Reserves generation 1 of a gang of `n` and delivers every part's answer: the
/// commits the GM sends.
fn reserved(w: &mut World, n: u32) -> Vec<GmToLm> {
    w.gm.step(Micros(1), GmInput::Client(gang_of(1, n)));
    let out = w.gm.step(Micros(2), GmInput::Schedule);
    assert!(!gang_ops(&out, "reserve").is_empty());
    let parts = out.to_lms.len();
    let outs = round(w, Micros(3), out.to_lms);
    let commits: Vec<GmToLm> = outs.into_iter().flat_map(|o| o.to_lms).collect();
    assert_eq!(commits.len(), parts, "every part held: commits");
    commits
}

/// After the stops: the gang waits for `restart_after`, then its next generation
/// starts every member together, each once, as its next run.
fn restarts_whole(w: &mut World, stopped_at: Micros, n: u32) {
    workers_confirm_kills(w, stopped_at);
    let before = w.launched.len();
    let early =
        w.gm.step(stopped_at + RESTART - Micros(1), GmInput::Schedule);
    assert!(
        gang_ops(&early, "reserve").is_empty(),
        "no generation before restart_after"
    );
    let at = stopped_at + RESTART;
    let out = w.gm.step(at, GmInput::Tick);
    let mut to_lms = out.to_lms;
    if gang_ops_of(&to_lms, "reserve").is_empty() {
        to_lms = w.gm.step(at, GmInput::Schedule).to_lms;
    }
    let reserves = gang_ops_of(&to_lms, "reserve");
    assert!(
        !reserves.is_empty() && reserves.iter().all(|(_, g)| *g == 2),
        "generation 2 reserves: {reserves:?}; {:?}",
        w.gm.gangs()
            .waiting(common::JobId(1))
            .map(|w| w.2.to_owned())
    );
    w.run(at, to_lms);
    let again: BTreeSet<TaskId> = w.launched[before..].iter().copied().collect();
    assert_eq!(
        (again.len(), w.launched.len() - before),
        (n as usize, n as usize),
        "generation 2 launched every member once: {:?}",
        &w.launched[before..]
    );
    for lm in &w.lms {
        for (task, a) in lm.running() {
            assert_eq!(a.task.attempt, 2, "{task} runs as its second run");
        }
    }
    assert!(w.gm.gangs().is_empty(), "started");
    assert_eq!(w.gm.gangs().stats.broken, 1);
    // The end of a member's run of generation 2 is the member's.
    let ended = finished(w.launched[before], 2, at + Micros(1));
    let out = w.gm.step(at + Micros(2), GmInput::Lm(ended));
    assert_eq!(out.ended.len(), 1, "taken");
}

/// LM 0's word that run `attempt` of `task` finished (published by the LM).
fn finished(task: TaskId, attempt: u32, at: Micros) -> LmToGm {
    let end = common::messages::TaskEnd {
        used: None,
        task,
        attempt,
        node: NodeId(0),
        at,
        failure: None,
    };
    LmToGm::Ended(common::messages::TasksEnded {
        lm: LmId(0),
        gm: GmId(0),
        ends: vec![end],
        publish: common::messages::EndsPublished::ByLm,
    })
}

/// LM 3 dies after answering `Held`, before its commit; it comes back (a new life,
/// holding nothing) before the commit arrives, and answers it `NotHeld`. LMs 0 to
/// 2 launched their parts: the GM stops them (every member killed), drops the end
/// of a stopped run that finished first, and starts all eight again together.
#[test]
fn a_part_lost_with_its_lm_after_the_commit_restarts_the_gang_whole() {
    let mut w = world();
    let commits = reserved(&mut w, 8);
    // LM 3 restarts: its hold is gone.
    let spec = LmSpec {
        id: LmId(3),
        partitions: vec![vec![NodeSpec {
            capacity: Resources::cores(2, 2048),
            constraints: ConstraintSet::EMPTY,
        }]],
    };
    w.lms[3] = LocalMaster::new(&spec, 1, lm_core::LmConfig::default(), Micros(3));
    let outs = round(&mut w, Micros(4), commits);
    assert_eq!(w.launched.len(), 6, "LMs 0 to 2 launched their parts");
    let restarted: Vec<_> = outs.iter().flat_map(|o| &o.gangs_restarted).collect();
    assert_eq!(restarted.len(), 1, "the gang is broken once");
    let (job, members) = restarted[0];
    assert_eq!(*job, common::JobId(1));
    assert_eq!(members.len(), 8);
    assert!(members.iter().all(|(_, run)| *run == 2));
    let stops: Vec<GmToLm> = outs.into_iter().flat_map(|o| o.to_lms).collect();
    let mut lms: Vec<LmId> = gang_ops_of(&stops, "stop").iter().map(|s| s.0).collect();
    lms.sort();
    assert_eq!(
        lms,
        (0..LMS).map(LmId).collect::<Vec<_>>(),
        "a stop to every LM"
    );
    assert!(gang_ops_of(&stops, "commit").is_empty());
    w.run(Micros(5), stops);
    let mut killed: Vec<TaskId> = w.kills.iter().map(|k| k.0).collect();
    killed.sort();
    let mut launched = w.launched.clone();
    launched.sort();
    assert_eq!(killed, launched, "every launched member is stopped");
    assert!(w.kills.iter().all(|k| k.1 == 1), "the first runs");
    assert!(w.lms.iter().all(|lm| lm.running().is_empty()));
    // A stopped run that finished before its kill: its end is void.
    let ended = finished(w.launched[0], 1, Micros(5));
    let out = w.gm.step(Micros(6), GmInput::Lm(ended));
    assert!(out.ended.is_empty(), "a void run's end is dropped");
    assert_eq!(w.gm.gangs().stats.void_ends, 1);
    // LM 3's new life's heartbeat: the view takes it up.
    let heartbeat = w.lms[3].snapshot(Micros(7));
    w.gm.step(Micros(7), GmInput::Lm(LmToGm::State(heartbeat)));
    restarts_whole(&mut w, Micros(4), 8);
}

/// A member's node goes down while its part is held at one LM: at the commit, that
/// LM launches nothing of its part (no member ever runs alone) and answers `NotHeld`;
/// the others launched theirs, so the GM restarts the gang whole, on the room left.
#[test]
fn a_member_whose_node_went_down_while_held_restarts_the_gang_whole() {
    let mut w = world();
    let commits = reserved(&mut w, 6);
    let down = commits[commits.len() - 1].lm().index();
    let lost = LmInput::WorkerLost {
        nodes: vec![NodeId(0)],
        reason: "test".into(),
    };
    w.lms[down].step(Micros(3), lost).unwrap();
    let parts = commits.len();
    let outs = round(&mut w, Micros(4), commits);
    assert!(
        w.lms[down].running().is_empty(),
        "nothing of its part launched"
    );
    assert_eq!(
        w.launched.len(),
        2 * (parts - 1),
        "the other parts launched"
    );
    assert_eq!(w.lms[down].gang_holds(), 0, "its hold is given back");
    let restarted: usize = outs.iter().map(|o| o.gangs_restarted.len()).sum();
    assert_eq!(restarted, 1);
    let stops: Vec<GmToLm> = outs.into_iter().flat_map(|o| o.to_lms).collect();
    assert_eq!(
        gang_ops_of(&stops, "stop").len(),
        parts,
        "a stop to every part"
    );
    w.run(Micros(5), stops);
    assert_eq!(
        w.kills.len(),
        w.launched.len(),
        "every launched member stopped"
    );
    assert!(w.lms.iter().all(|lm| lm.running().is_empty()));
    // Its node stays down: the next generation fits on the three other LMs.
    restarts_whole(&mut w, Micros(4), 6);
    assert!(w.lms[down].running().is_empty());
}

/// A stop that reaches an LM before the commit it races (the network reordered
/// them): the commit finds nothing held and launches nothing.
#[test]
fn a_commit_arriving_after_its_stop_launches_nothing() {
    let mut w = world();
    let commits = reserved(&mut w, 8);
    let (first, rest): (Vec<_>, Vec<_>) = commits.into_iter().partition(|m| m.lm() == LmId(0));
    // LM 0 answers NotHeld (its hold expired: a tick past it).
    w.lms[0].step(Micros(3) + HOLD, LmInput::Tick).unwrap();
    let outs = round(&mut w, Micros(4), first);
    let stops: Vec<GmToLm> = outs.into_iter().flat_map(|o| o.to_lms).collect();
    assert_eq!(gang_ops_of(&stops, "stop").len(), LMS as usize);
    w.run(Micros(5), stops);
    // The commits to LMs 1 to 3 arrive after their stops.
    for m in rest {
        let answers = w.deliver(Micros(6), m);
        assert!(answers
            .iter()
            .all(|a| matches!(a, LmToGm::GangAnswer(g) if g.outcome == GangOutcome::NotHeld)));
    }
    assert!(
        w.launched.is_empty() && w.start_orders == 0,
        "nothing started"
    );
    assert!(w.free_everywhere());
    restarts_whole(&mut w, Micros(4), 8);
}

/// A member that LM 0 launched is declared lost (its worker went silent) while
/// the other commits are still on their way: the GM publishes that end, so it
/// cannot wait for the gang's start. The gang is broken: restarted whole, the run
/// void, no retry of the member alone (fault seed 7972: the retry and the
/// restart both ran the member as run 2).
#[test]
fn a_member_lost_while_its_gang_commits_restarts_the_gang_whole() {
    let mut w = world();
    let commits = reserved(&mut w, 8);
    let (first, _rest): (Vec<_>, Vec<_>) = commits.into_iter().partition(|m| m.lm() == LmId(0));
    let outs = round(&mut w, Micros(4), first);
    assert!(outs.iter().all(|o| o.gangs_restarted.is_empty()));
    assert_eq!(w.launched.len(), 2, "LM 0 launched its part");
    let end = common::messages::TaskEnd {
        used: None,
        task: w.launched[0],
        attempt: 1,
        node: NodeId(0),
        at: Micros(5),
        failure: Some(common::messages::TaskFailure::Lost {
            reason: "no word from its worker".into(),
        }),
    };
    let lost = LmToGm::Ended(common::messages::TasksEnded {
        lm: LmId(0),
        gm: GmId(0),
        ends: vec![end],
        publish: common::messages::EndsPublished::ByGm,
    });
    let out = w.gm.step(Micros(5), GmInput::Lm(lost));
    assert!(out.ended.is_empty(), "the void run's end is not taken");
    assert!(out.retries.is_empty(), "no retry of the member alone");
    assert_eq!(out.gangs_restarted.len(), 1, "the gang is restarted whole");
    assert!(out.gangs_restarted[0].1.iter().all(|(_, run)| *run == 2));
    assert_eq!(gang_ops_of(&out.to_lms, "stop").len(), LMS as usize);
    assert_eq!(w.gm.gangs().stats.broken, 1);
}
