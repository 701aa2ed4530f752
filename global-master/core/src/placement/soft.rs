//! The soft stage (alsched, issue 36): filter and fit over one candidate partition
//! for a branch of a job's utility tree. The task's hard constraints apply first, as
//! in [`super::fit::find_node`]; the branch's set (AND, OR, NOT of attribute rows)
//! narrows the survivors further, one raw 64-bit word at a time. Also the popcounts
//! that explain a branch not taken: no node of the set anywhere, or none with room.

use super::contract::{Effort, Found, Views};
use super::fit::{fits, Fit};
use super::select::Candidate;
use crate::view::PartitionView;
use common::utility::BitExpr;
use common::{ConstraintSet, Resources};

/// The word `w` of the slots of `part` with every constraint of `hard`, in `set`,
/// and (with `free_only`) something free.
#[inline]
fn word(
    part: &PartitionView,
    hard: ConstraintSet,
    set: &BitExpr,
    w: usize,
    free_only: bool,
) -> u64 {
    let mut acc = if free_only {
        part.available.as_raw_slice()[w]
    } else {
        u64::MAX
    };
    if w + 1 == part.len().div_ceil(64) && !part.len().is_multiple_of(64) {
        acc &= (1u64 << (part.len() % 64)) - 1;
    }
    for j in hard.iter() {
        if acc == 0 {
            return 0;
        }
        acc &= part.constraint_bits[j]
            .as_raw_slice()
            .get(w)
            .copied()
            .unwrap_or(0);
    }
    if acc == 0 {
        return 0;
    }
    let empty: &[u64] = &[];
    let row = |b: usize| {
        part.constraint_bits
            .get(b)
            .map_or(empty, |r| r.as_raw_slice())
    };
    acc & set.word(&row, w)
}

/// The first slot of `candidate` (in slot order) in `set`, with the hard
/// constraints and room for `request`, preferring a slot where no QUEUEABLE work
/// must be killed; skipped while its LM has not reported or is busy.
pub fn scan_set(
    views: &Views,
    candidate: Candidate,
    hard: ConstraintSet,
    set: &BitExpr,
    request: &Resources,
    effort: &mut Effort,
) -> Option<Found> {
    let view = views.lms.get(candidate.lm)?.as_ref()?;
    if view.is_busy() {
        return None;
    }
    let part = &view.partitions[candidate.partition];
    effort.partitions += 1;
    if hard.width() > part.constraint_bits.len() {
        return None;
    }
    let words = part.len().div_ceil(64);
    let mut reclaiming = None;
    for w in 0..words {
        let mut acc = word(part, hard, set, w, true);
        while acc != 0 {
            let slot = w * 64 + acc.trailing_zeros() as usize;
            match fits(part, slot, request) {
                Fit::Free => {
                    effort.words += w as u64 + 1;
                    return Some(found(view, candidate, slot));
                }
                Fit::Reclaiming => {
                    reclaiming.get_or_insert(slot);
                }
                Fit::No => {}
            }
            acc &= acc - 1;
        }
    }
    effort.words += words as u64;
    reclaiming.map(|slot| found(view, candidate, slot))
}

fn found(view: &crate::view::LmView, candidate: Candidate, slot: usize) -> Found {
    Found {
        lm: candidate.lm,
        node: view.partitions[candidate.partition].nodes[slot],
        placement: candidate.placement,
    }
}

/// How many tasks of `request` the view has room for, counting up to `need`, on
/// the nodes with the hard constraints in `set` (every partition of every LM that
/// reported and is not busy, as [`scan_set`] searches them). What an `nCk` branch
/// must find before its first task is placed: room for the `k` it needs.
pub fn room_in_set(
    views: &Views,
    hard: ConstraintSet,
    set: &BitExpr,
    request: &Resources,
    need: u64,
) -> u64 {
    let mut room = 0;
    for view in views.lms.iter().flatten().filter(|v| !v.is_busy()) {
        for part in &view.partitions {
            if hard.width() > part.constraint_bits.len() {
                continue;
            }
            for w in 0..part.len().div_ceil(64) {
                let mut acc = word(part, hard, set, w, true);
                while acc != 0 {
                    let free = part.free[w * 64 + acc.trailing_zeros() as usize];
                    room += tasks_in(&free, request);
                    if room >= need {
                        return room;
                    }
                    acc &= acc - 1;
                }
            }
        }
    }
    room
}

/// How many `request`s fit in `free`.
fn tasks_in(free: &Resources, request: &Resources) -> u64 {
    let per = |have: u64, want: u64| have.checked_div(want).unwrap_or(u64::MAX);
    per(free.cpu_millis, request.cpu_millis).min(per(free.memory_mb, request.memory_mb))
}

/// Over every partition of every LM that reported: the nodes with the hard
/// constraints in `set`, and those of them with something free (popcounts).
pub fn count_set(views: &Views, hard: ConstraintSet, set: &BitExpr) -> (u64, u64) {
    let (mut nodes, mut free) = (0, 0);
    for view in views.lms.iter().flatten() {
        for part in &view.partitions {
            if hard.width() > part.constraint_bits.len() {
                continue;
            }
            for w in 0..part.len().div_ceil(64) {
                let all = word(part, hard, set, w, false);
                nodes += u64::from(all.count_ones());
                free += u64::from((all & part.available.as_raw_slice()[w]).count_ones());
            }
        }
    }
    (nodes, free)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::fixtures::view;
    use common::messages::Placement;
    use common::NodeId;

    /// (hard constraints, set, cores, node found, nodes in set, free in set)
    type Row<'a> = (&'a [u64], &'a BitExpr, u64, Option<u32>, u64, u64);

    /// Node i has bit 0 when odd, bit 1 when i % 3 == 0; 2 cores each.
    #[test]
    fn finds_the_first_node_of_the_set_with_room() {
        use BitExpr::*;
        let mut lms = vec![Some(view(10))];
        let c = Candidate {
            lm: 0,
            partition: 0,
            placement: Placement::Internal,
        };
        let not_odd = Not(Box::new(Bit(0)));
        let odd_or_3 = Or(vec![Bit(0), Bit(1)]);
        let table: &[Row] = &[
            (&[], &All, 1, Some(0), 10, 10),
            (&[], &Bit(0), 1, Some(1), 5, 5),
            (&[], &not_odd, 1, Some(0), 5, 5),
            (&[1], &Bit(0), 1, Some(3), 2, 2),
            (&[], &odd_or_3, 1, Some(0), 7, 7),
            (&[], &Bit(7), 1, None, 0, 0),
            (&[], &Bit(0), 3, None, 5, 5),
        ];
        for (hard, set, cores, want, nodes, free) in table {
            let hard = ConstraintSet::from_ids(hard.iter().copied()).unwrap();
            let views = Views {
                lms: &lms,
                me: 0,
                gms: 1,
            };
            let r = Resources::cores(*cores, 1);
            let got = scan_set(&views, c, hard, set, &r, &mut Effort::default());
            assert_eq!(got.map(|f| f.node.0), *want, "{hard} {set:?}");
            assert_eq!(count_set(&views, hard, set), (*nodes, *free), "{set:?}");
        }
        // Full nodes drop out of the set's free count and of the scan.
        if let Some(v) = lms[0].as_mut() {
            v.deduct(NodeId(1), &Resources::cores(2, 100));
        }
        let views = Views {
            lms: &lms,
            me: 0,
            gms: 1,
        };
        let r = Resources::cores(1, 1);
        let got = scan_set(
            &views,
            c,
            ConstraintSet::EMPTY,
            &Bit(0),
            &r,
            &mut Effort::default(),
        );
        assert_eq!(got.map(|f| f.node.0), Some(3));
        assert_eq!(count_set(&views, ConstraintSet::EMPTY, &Bit(0)), (5, 4));
    }
}
