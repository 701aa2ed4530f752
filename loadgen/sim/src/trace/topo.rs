//! The order of a job's DAG stages: [`topo_order`] (parents before children) and,
//! when there is none, the cycle that prevents it. A leaf: the TPC-H reader validates
//! with it and the trace statistics walk critical paths with it.

use super::DagStage;
use rustc_hash::FxHashMap;

/// Why stages have no topological order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TopoError {
    /// Two stages with the same id.
    DuplicateId(u32),
    /// `stage` depends on `parent`, which is not among the stages.
    UnknownParent { stage: u32, parent: u32 },
    /// Stage ids along a cycle, the first repeated at the end (`[1, 2, 1]`; a self
    /// edge is `[3, 3]`).
    Cycle(Vec<u32>),
}

/// Indices into `stages`, every stage after all of its parents (Kahn's algorithm;
/// among ready stages, the lowest index first, so the order is deterministic).
pub fn topo_order(stages: &[DagStage]) -> Result<Vec<usize>, TopoError> {
    let mut index = FxHashMap::default();
    for (i, s) in stages.iter().enumerate() {
        if index.insert(s.id, i).is_some() {
            return Err(TopoError::DuplicateId(s.id));
        }
    }
    let mut children = vec![Vec::new(); stages.len()];
    let mut waiting = vec![0usize; stages.len()];
    for (i, s) in stages.iter().enumerate() {
        for &p in &s.depends_on {
            let Some(&pi) = index.get(&p) else {
                return Err(TopoError::UnknownParent {
                    stage: s.id,
                    parent: p,
                });
            };
            children[pi].push(i);
            waiting[i] += 1;
        }
    }
    let mut ready: std::collections::BTreeSet<usize> =
        (0..stages.len()).filter(|&i| waiting[i] == 0).collect();
    let mut order = Vec::with_capacity(stages.len());
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &c in &children[i] {
            waiting[c] -= 1;
            if waiting[c] == 0 {
                ready.insert(c);
            }
        }
    }
    if order.len() == stages.len() {
        return Ok(order);
    }
    // Every stage left waits for another stage left: walking up to such a parent
    // from any of them must come back to a stage already seen.
    let mut seen_at: FxHashMap<usize, usize> = FxHashMap::default();
    let mut path: Vec<usize> = Vec::new();
    let mut at = (0..stages.len()).find(|&i| waiting[i] > 0).unwrap_or(0);
    loop {
        if let Some(&start) = seen_at.get(&at) {
            let mut cycle: Vec<u32> = path[start..].iter().map(|&i| stages[i].id).collect();
            // Walking went child -> parent: turn it into parent -> child.
            cycle.reverse();
            cycle.push(cycle[0]);
            return Err(TopoError::Cycle(cycle));
        }
        seen_at.insert(at, path.len());
        path.push(at);
        at = stages[at]
            .depends_on
            .iter()
            .map(|p| index[p])
            .find(|&pi| waiting[pi] > 0)
            .unwrap_or(at);
    }
}

/// The longest path through the stages, each weighing `weight(index)`: what the job
/// takes with unbounded parallelism. `None` when the stages have no order.
pub fn critical_path(stages: &[DagStage], weight: impl Fn(usize) -> u64) -> Option<u64> {
    let order = topo_order(stages).ok()?;
    let index: FxHashMap<u32, usize> = stages.iter().enumerate().map(|(i, s)| (s.id, i)).collect();
    let mut finish = vec![0u64; stages.len()];
    for i in order {
        let start = stages[i]
            .depends_on
            .iter()
            .map(|p| finish[index[p]])
            .max()
            .unwrap_or(0);
        finish[i] = start.saturating_add(weight(i));
    }
    finish.into_iter().max()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dag(edges: &[(u32, &[u32])]) -> Vec<DagStage> {
        edges
            .iter()
            .map(|&(id, deps)| DagStage {
                id,
                name: format!("s{id}"),
                depends_on: deps.to_vec(),
            })
            .collect()
    }

    #[test]
    fn orders_a_diamond_parents_first() {
        let d = dag(&[(4, &[2, 3]), (2, &[1]), (3, &[1]), (1, &[])]);
        assert_eq!(topo_order(&d), Ok(vec![3, 1, 2, 0]));
        // Weights 1, 2, 5, 10 on stages 1, 2, 3, 4: 1 + 5 + 10.
        let w = [10, 2, 5, 1];
        assert_eq!(critical_path(&d, |i| w[i]), Some(16));
    }

    #[test]
    fn finds_cycles_and_bad_edges() {
        let d = dag(&[(1, &[]), (2, &[1, 3]), (3, &[2])]);
        assert_eq!(topo_order(&d), Err(TopoError::Cycle(vec![3, 2, 3])));
        assert_eq!(
            topo_order(&dag(&[(1, &[1])])),
            Err(TopoError::Cycle(vec![1, 1]))
        );
        assert_eq!(
            topo_order(&dag(&[(1, &[7])])),
            Err(TopoError::UnknownParent {
                stage: 1,
                parent: 7
            })
        );
        assert_eq!(
            topo_order(&dag(&[(1, &[]), (1, &[])])),
            Err(TopoError::DuplicateId(1))
        );
        assert_eq!(critical_path(&dag(&[(1, &[1])]), |_| 1), None);
    }
}
