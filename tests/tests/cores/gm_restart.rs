//! A GM that restarts must not reuse the batch numbers of its previous life: an LM
//! answers a number it already applied from its record (the answer may have been
//! lost), so a new life numbering from 1 again would get its first batches answered
//! with the old life's outcomes and its tasks would never run (issue 14's "0 of 20
//! run" after a graceful GM restart). With `first_batch_seq` from the start time, the
//! second life's batch is applied.

use common::cluster::{LmSpec, NodeSpec};
use common::messages::LaunchOutcome;
use common::protocol::{GmToLm, LmToGm};
use common::{ConstraintSet, GmId, LmId, Micros, Resources, TaskId, TaskSpec};
use global_master::core::{GlobalMaster, GmConfig, GmInput};
use local_master::{LmConfig, LmInput, LocalMaster};

fn life(first_batch_seq: u64) -> GlobalMaster {
    GlobalMaster::new(GmConfig {
        first_batch_seq,
        ..GmConfig::new(GmId(0), 1, 1)
    })
}

/// One task submitted to `gm`, placed, sent to `lm`; the LM's answer.
fn run_one(gm: &mut GlobalMaster, lm: &mut LocalMaster, job: u64, now: u64) -> Vec<TaskId> {
    let snapshot = lm.snapshot(Micros(now));
    gm.step(Micros(now), GmInput::Lm(LmToGm::State(snapshot)));
    let task = TaskSpec::short(TaskId::new(job, 0), Resources::cores(1, 10), Micros(5));
    gm.step(
        Micros(now + 1),
        GmInput::Client(common::protocol::ClientToGm::Submit(vec![task])),
    );
    let out = gm.step(Micros(now + 2), GmInput::Schedule);
    let [GmToLm::Launch(batch)] = &out.to_lms[..] else {
        panic!("one launch batch, got {:?}", out.to_lms);
    };
    let answer = lm
        .step(Micros(now + 3), LmInput::Gm(GmToLm::Launch(batch.clone())))
        .expect("valid batch");
    let response = answer.launch_answer().expect("an answer").clone();
    response
        .outcomes
        .iter()
        .filter(|(_, o)| matches!(o, LaunchOutcome::Launched { .. }))
        .map(|(t, _)| *t)
        .collect()
}

#[test]
fn a_restarted_gm_does_not_get_its_previous_lifes_answers() {
    let node = NodeSpec {
        capacity: Resources::cores(4, 1024),
        constraints: ConstraintSet::EMPTY,
    };
    let spec = LmSpec {
        id: LmId(0),
        partitions: vec![vec![node]],
    };
    let mut lm = LocalMaster::new(&spec, 1, LmConfig::default(), Micros(0));

    // First life, started at t = 1,000 µs: job 1 launches.
    let mut first = life(1_000);
    assert_eq!(run_one(&mut first, &mut lm, 1, 10), vec![TaskId::new(1, 0)]);

    // The GM restarts (t = 5,000 µs): job 2 must launch, not be answered with job
    // 1's outcome.
    let mut second = life(5_000);
    assert_eq!(
        run_one(&mut second, &mut lm, 2, 20),
        vec![TaskId::new(2, 0)]
    );

    // The bug this guards against: numbering from 1 in both lives.
    let mut lm2 = LocalMaster::new(&spec, 1, LmConfig::default(), Micros(0));
    let mut old = life(0);
    assert_eq!(run_one(&mut old, &mut lm2, 1, 10), vec![TaskId::new(1, 0)]);
    let mut reused = life(0);
    assert_eq!(
        run_one(&mut reused, &mut lm2, 2, 20),
        Vec::<TaskId>::new(),
        "with reused numbers the LM answers from its record (for the requests the repeat \
         names: none of job 1's), and job 2 never runs"
    );
}
