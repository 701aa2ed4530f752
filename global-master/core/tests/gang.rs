//! Gangs end to end over the pure cores: one GM, four LMs, every message moved by
//! hand (delivered, held back, or dropped), so each failure case of the transaction
//! (`docs/gangs.md`) is played exactly. Starts are read from the LMs' event stream
//! (`Launched` events) and start orders, never from the GM's belief.

mod gang_world;

use gang_world::*;

#[test]
fn a_gang_of_eight_on_four_lms_starts_all_eight() {
    let mut w = world();
    w.gm.step(Micros(1), GmInput::Client(gang_of(1, 8)));
    let out = w.gm.step(Micros(2), GmInput::Schedule);
    let reserves = gang_ops(&out, "reserve");
    assert_eq!(reserves.len(), 4, "one part per LM: {reserves:?}");
    w.run(Micros(3), out.to_lms);
    let launched: BTreeSet<TaskId> = w.launched.iter().copied().collect();
    assert_eq!(launched.len(), 8, "every member launched: {:?}", w.launched);
    assert_eq!(w.launched.len(), 8, "each once");
    assert_eq!(w.start_orders, 8);
    assert!(w.gm.gangs().is_empty());
    assert_eq!(w.gm.gangs().stats.started, 1);
    assert!(w.lms.iter().all(|lm| lm.gang_holds() == 0));
}

/// A stale view: LM 3's node was taken (by a launch the GM's view has not seen):
/// LM 3 refuses its part, the GM releases the three held ones, nothing starts;
/// when the room comes back, the next generation starts all eight.
#[test]
fn an_lm_that_refuses_one_part_makes_the_gm_release_every_other_part() {
    let mut w = world();
    let squatter = TaskSpec::short(TaskId::new(99, 0), Resources::cores(2, 100), Micros(1));
    let batch = GmToLm::Launch(LaunchBatch {
        gm: GmId(0),
        life: 0,
        lm: LmId(3),
        seq: 1_000,
        resend: false,
        requests: vec![LaunchRequest {
            task: squatter,
            node: NodeId(0),
            placement: Placement::Internal,
        }],
    });
    w.deliver(Micros(1), batch);
    w.launched.clear();
    w.start_orders = 0;
    w.gm.step(Micros(1), GmInput::Client(gang_of(1, 8)));
    let out = w.gm.step(Micros(2), GmInput::Schedule);
    let mut answers = Vec::new();
    for m in out.to_lms {
        answers.extend(w.deliver(Micros(3), m));
    }
    let refused = answers.iter().filter(
        |a| matches!(a, LmToGm::GangAnswer(g) if matches!(g.outcome, GangOutcome::Refused(_))),
    );
    assert_eq!(refused.count(), 1, "LM 3 refuses");
    let mut releases = Vec::new();
    let mut to_lms = Vec::new();
    for a in answers {
        let out = w.gm.step(Micros(4), GmInput::Lm(a));
        assert!(gang_ops(&out, "commit").is_empty(), "never a commit");
        releases.extend(gang_ops(&out, "release"));
        to_lms.extend(out.to_lms);
    }
    releases.sort();
    assert_eq!(releases, vec![(LmId(0), 1), (LmId(1), 1), (LmId(2), 1)]);
    w.run(Micros(5), to_lms);
    assert!(
        w.launched.is_empty() && w.start_orders == 0,
        "nothing started"
    );
    assert!(w.lms.iter().all(|lm| lm.gang_holds() == 0), "nothing held");
    assert!(w.lms[..3]
        .iter()
        .all(|lm| lm.free() == &lm.topology().capacity[..]));
    // The squatter ends: the next generation fits and starts whole.
    let end = WorkerReport::Finished {
        used: None,
        attempt: 1,
        node: NodeId(0),
        task: TaskId::new(99, 0),
        at: Micros(6),
    };
    w.lms[3]
        .step(Micros(6), LmInput::Worker(WorkerToLm::Report(end)))
        .unwrap();
    let snapshot = w.lms[3].snapshot(Micros(7));
    w.gm.step(Micros(7), GmInput::Lm(LmToGm::State(snapshot)));
    let out = w.gm.step(Micros(8_000), GmInput::Schedule);
    let reserves = gang_ops(&out, "reserve");
    assert!(reserves.len() == 4 && reserves.iter().all(|(_, g)| *g == 2));
    w.run(Micros(8_001), out.to_lms);
    assert_eq!(w.launched.len(), 8);
}

/// The GM sends its reserves and dies: no commit ever comes. Every LM gives its
/// part back at the expiry (a tick: time is an input), nothing started, and a
/// commit that arrives after all starts nothing.
#[test]
fn a_gm_that_dies_between_reserve_and_commit_leaves_nothing_after_the_expiry() {
    let mut w = world();
    w.gm.step(Micros(1), GmInput::Client(gang_of(1, 8)));
    let out = w.gm.step(Micros(2), GmInput::Schedule);
    let commits: Vec<GmToLm> = (out.to_lms.iter())
        .map(|m| match m {
            GmToLm::Gang(g) => {
                let mut g = g.clone();
                g.op = GangOp::Commit;
                GmToLm::Gang(g)
            }
            other => other.clone(),
        })
        .collect();
    for m in out.to_lms {
        // The answers go nowhere: the GM is dead.
        w.deliver(Micros(3), m);
    }
    assert!(
        w.lms.iter().all(|lm| lm.gang_holds() == 1),
        "held meanwhile"
    );
    assert!(!w.free_everywhere(), "the held room is taken");
    // Just before the expiry: still held. A tick at the expiry gives it back.
    for lm in &mut w.lms {
        lm.step(Micros(3) + HOLD - Micros(1), LmInput::Tick)
            .unwrap();
        assert_eq!(lm.gang_holds(), 1);
        assert!(lm.next_wakeup() <= Micros(3) + HOLD);
        lm.step(Micros(3) + HOLD, LmInput::Tick).unwrap();
    }
    assert!(w.lms.iter().all(|lm| lm.gang_holds() == 0));
    assert!(w.free_everywhere(), "no reservation left");
    assert!(w.lms.iter().all(|lm| lm.gang_counters().expired == 1));
    let mut late = Vec::new();
    for m in commits {
        late.extend(w.deliver(Micros(3) + HOLD + Micros(1), m));
    }
    assert_eq!(late.len(), 4);
    assert!(late
        .iter()
        .all(|a| matches!(a, LmToGm::GangAnswer(g) if g.outcome == GangOutcome::NotHeld)));
    assert!(
        w.launched.is_empty() && w.start_orders == 0,
        "no task started"
    );
    assert!(w.free_everywhere());
}

/// Generation 1's answer from LM 3 is delayed past `commit_by`: the GM releases
/// generation 1 and tries generation 2. The late `Held` of generation 1 makes it
/// send a release, never a commit; generation 2 starts all eight exactly once.
#[test]
fn a_late_held_answer_of_an_old_generation_starts_nothing() {
    let mut w = world();
    w.gm.step(Micros(1), GmInput::Client(gang_of(1, 8)));
    let out = w.gm.step(Micros(2), GmInput::Schedule);
    let mut late = None;
    let mut answers = Vec::new();
    for m in out.to_lms {
        let lm = m.lm();
        let a = w.deliver(Micros(3), m);
        if lm == LmId(3) {
            late = Some(a);
        } else {
            answers.extend(a);
        }
    }
    for a in answers {
        let out = w.gm.step(Micros(4), GmInput::Lm(a));
        assert!(gang_ops(&out, "commit").is_empty(), "LM 3 has not answered");
    }
    // Past commit_by (half the hold): the attempt is released everywhere.
    let past = Micros(2) + Micros(HOLD.0 / 2) + Micros(2);
    let out = w.gm.step(past, GmInput::Tick);
    let mut releases = gang_ops(&out, "release");
    releases.sort();
    assert_eq!(releases, (0..LMS).map(|l| (LmId(l), 1)).collect::<Vec<_>>());
    w.run(past, out.to_lms);
    assert!(w.free_everywhere() && w.launched.is_empty());
    // Generation 2 goes out; before its answers, generation 1's late Held arrives.
    let retry = past + Micros(1_000);
    let out = w.gm.step(retry, GmInput::Schedule);
    let reserves = gang_ops(&out, "reserve");
    assert!(reserves.len() == 4 && reserves.iter().all(|(_, g)| *g == 2));
    let mut answers2 = Vec::new();
    for m in out.to_lms {
        answers2.extend(w.deliver(retry, m));
    }
    for a in late.expect("LM 3 answered") {
        let out = w.gm.step(retry, GmInput::Lm(a));
        assert!(
            gang_ops(&out, "commit").is_empty(),
            "an old generation never commits"
        );
        assert_eq!(gang_ops(&out, "release"), vec![(LmId(3), 1)]);
        w.run(retry, out.to_lms);
    }
    assert!(w.launched.is_empty(), "nothing started by the late answer");
    assert_eq!(w.lms[3].gang_holds(), 1, "generation 2 still held at LM 3");
    let mut commits = Vec::new();
    let mut to_lms = Vec::new();
    for a in answers2 {
        let out = w.gm.step(retry, GmInput::Lm(a));
        commits.extend(gang_ops(&out, "commit"));
        to_lms.extend(out.to_lms);
    }
    assert!(commits.len() == 4 && commits.iter().all(|(_, g)| *g == 2));
    w.run(retry, to_lms);
    let launched: BTreeSet<TaskId> = w.launched.iter().copied().collect();
    assert_eq!((launched.len(), w.launched.len()), (8, 8));
    assert!(w.gm.gangs().stats.stale_answers >= 1);
}

/// A reserve of an abandoned generation reaching an LM after a newer generation
/// was released there is refused as stale: nothing is held for it.
#[test]
fn a_reserve_older_than_one_seen_is_stale_at_the_lm() {
    let mut w = world();
    w.gm.step(Micros(1), GmInput::Client(gang_of(1, 2)));
    let out = w.gm.step(Micros(2), GmInput::Schedule);
    let GmToLm::Gang(reserve) = out.to_lms[0].clone() else {
        panic!("a reserve: {:?}", out.to_lms);
    };
    let mut release = reserve.clone();
    release.generation = 5;
    release.op = GangOp::Release;
    w.deliver(Micros(3), GmToLm::Gang(release));
    let answers = w.deliver(Micros(4), GmToLm::Gang(reserve));
    assert!(matches!(
        &answers[..],
        [LmToGm::GangAnswer(a)] if a.outcome == GangOutcome::Stale { newest: 5 }
    ));
    assert!(w.free_everywhere());
}

/// A gang that cannot fit (nine members, eight cores) never reserves; past its
/// timeout with `fail`, its tasks end failed and nothing ran.
#[test]
fn a_gang_that_never_fits_times_out_without_a_reserve() {
    let mut w = world();
    let ClientToGm::SubmitGang { tasks, retry, .. } = gang_of(1, 9) else {
        unreachable!()
    };
    let gang = GangSpec::all(9, Micros(1_000_000));
    let submit = ClientToGm::SubmitGang { tasks, retry, gang };
    w.gm.step(Micros(1), GmInput::Client(submit));
    let out = w.gm.step(Micros(2), GmInput::Schedule);
    assert!(gang_ops(&out, "reserve").is_empty());
    let why = w.gm.gangs().waiting(common::JobId(1)).unwrap().2.to_owned();
    assert!(
        why.contains("the 9 members that must start together"),
        "{why}"
    );
    let out = w.gm.step(Micros(1_000_001), GmInput::Tick);
    assert_eq!(out.gangs_failed.len(), 1);
    assert_eq!(out.gangs_failed[0].1.len(), 9);
    assert!(w.launched.is_empty() && w.free_everywhere());
}

/// A commit the transport gave up on is sent again while the part is surely held:
/// the gang still starts whole. Past the part's earliest expiry it is broken and
/// its job cancelled (what launched is stopped).
#[test]
fn an_undelivered_commit_is_sent_again_until_the_part_may_have_expired() {
    for late in [false, true] {
        let mut w = world();
        w.gm.step(Micros(1), GmInput::Client(gang_of(1, 8)));
        let out = w.gm.step(Micros(2), GmInput::Schedule);
        let mut answers = Vec::new();
        for m in out.to_lms {
            answers.extend(w.deliver(Micros(3), m));
        }
        let mut commits = Vec::new();
        for a in answers {
            commits.extend(w.gm.step(Micros(4), GmInput::Lm(a)).to_lms);
        }
        assert_eq!(commits.len(), 4);
        // LM 3's commit is lost; the transport says so.
        let lost = commits.pop().unwrap();
        assert_eq!(lost.lm(), LmId(3));
        w.run(Micros(5), commits);
        assert_eq!(w.launched.len(), 6, "three parts launched");
        let when = if late { Micros(2) + HOLD } else { Micros(6) };
        let undelivered = gm_core::Undelivered::of(&lost);
        let out = w.gm.step(when, GmInput::Undelivered(undelivered));
        if late {
            let restarted: Vec<_> = out.gangs_restarted.iter().map(|r| r.0).collect();
            assert_eq!(restarted, vec![common::JobId(1)]);
            assert!(gang_ops(&out, "commit").is_empty());
            assert_eq!(
                gang_ops(&out, "stop").len(),
                LMS as usize,
                "the gang is stopped everywhere, to restart whole"
            );
        } else {
            assert_eq!(gang_ops(&out, "commit"), vec![(LmId(3), 1)]);
            w.run(when, out.to_lms);
            let launched: BTreeSet<TaskId> = w.launched.iter().copied().collect();
            assert_eq!((launched.len(), w.launched.len()), (8, 8));
            assert_eq!(w.gm.gangs().stats.commits_resent, 1);
        }
    }
}

/// A restarted GM resumes a gang that had not started from its journal as a gang
/// (`Resumed::gangs`): it waits for room for all its members, not in the queues,
/// and starts all eight together.
#[test]
fn a_resumed_gang_stays_a_gang() {
    let mut w = world();
    let ClientToGm::SubmitGang { tasks, gang, .. } = gang_of(1, 8) else {
        unreachable!()
    };
    let resume = gm_core::Resumed {
        tasks: tasks.into_iter().map(|t| (t, 0)).collect(),
        held: Vec::new(),
        retry: RetryPolicy::default(),
        dags: Vec::new(),
        gangs: vec![(common::JobId(1), gang)],
    };
    w.gm.step(Micros(1), GmInput::Resume(resume));
    assert_eq!(w.gm.gangs().len(), 1, "waiting as a gang");
    assert!(w.gm.queues().is_empty(), "not in the queues");
    let out = w.gm.step(Micros(2), GmInput::Schedule);
    assert_eq!(gang_ops(&out, "reserve").len(), LMS as usize);
    w.run(Micros(3), out.to_lms);
    let launched: BTreeSet<TaskId> = w.launched.iter().copied().collect();
    assert_eq!((launched.len(), w.launched.len()), (8, 8));
    assert_eq!(w.gm.gangs().stats.started, 1);
}
