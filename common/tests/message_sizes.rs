//! The GM <-> LM messages stay as small as their common variants: the rare large
//! ones (preemption, cancel and gang answers) are boxed, so that every launch
//! answer, heartbeat, start and end a driver moves is not copied at their size
//! (issue 36: the simulator's speed without trees).

use common::messages::LaunchResponse;
use common::protocol::LmToGm;
use std::mem::size_of;

#[test]
fn no_rare_answer_makes_every_lm_message_larger() {
    // The launch answer is the largest common message (with its snapshot); the
    // enum's tag may take a word beside it.
    let bound = size_of::<LaunchResponse>() + size_of::<usize>();
    assert!(
        size_of::<LmToGm>() <= bound,
        "LmToGm is {} bytes, more than a launch answer's {bound}: box the rare large variant",
        size_of::<LmToGm>(),
    );
}
