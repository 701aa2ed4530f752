//! Which container type each task asks for: Mercury's application-level policy
//! hybrid-GQ (section 5). Tasks shorter than `t_d` are QUEUEABLE with probability
//! `p_q` (seeded), all others GUARANTEED; only-G and only-Q are the extremes. The
//! default leaves every task Short (the Megha path).

use super::workload::Job;
use common::rng::{seeded, streams, Rng};
use common::{Micros, TaskKind};
use std::fmt;
use std::str::FromStr;

/// A task-type policy, written `short`, `only-g`, `only-q` or `hybrid:TD_S:PQ`
/// (`TD_S` in seconds or `inf`, `PQ` in [0, 1]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum TaskTypes {
    #[default]
    Short,
    OnlyG,
    OnlyQ,
    Hybrid {
        td: Micros,
        pq: f64,
    },
}

impl fmt::Display for TaskTypes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskTypes::Short => write!(f, "short"),
            TaskTypes::OnlyG => write!(f, "only-g"),
            TaskTypes::OnlyQ => write!(f, "only-q"),
            TaskTypes::Hybrid { td, pq } if *td == Micros::MAX => write!(f, "hybrid:inf:{pq}"),
            TaskTypes::Hybrid { td, pq } => write!(f, "hybrid:{}:{pq}", td.as_secs_f64()),
        }
    }
}

impl FromStr for TaskTypes {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "short" => return Ok(TaskTypes::Short),
            "only-g" => return Ok(TaskTypes::OnlyG),
            "only-q" => return Ok(TaskTypes::OnlyQ),
            _ => {}
        }
        let parts: Vec<&str> = s.split(':').collect();
        let [name, td, pq] = parts.as_slice() else {
            return Err(format!(
                "task types {s:?}: expected short, only-g, only-q or hybrid:TD_S:PQ"
            ));
        };
        if *name != "hybrid" {
            return Err(format!("task types {s:?}: unknown policy {name:?}"));
        }
        let td = match *td {
            "inf" => Micros::MAX,
            secs => match secs.parse::<f64>() {
                Ok(v) if v.is_finite() && v >= 0.0 => Micros::from_secs_f64(v),
                _ => return Err(format!("task types {s:?}: t_d must be seconds >= 0 or inf")),
            },
        };
        let pq = match pq.parse::<f64>() {
            Ok(v) if (0.0..=1.0).contains(&v) => v,
            _ => return Err(format!("task types {s:?}: p_q must be in [0, 1]")),
        };
        Ok(TaskTypes::Hybrid { td, pq })
    }
}

impl TaskTypes {
    /// A name fit for a directory.
    pub fn dir_name(&self) -> String {
        self.to_string().replace(':', "_")
    }
}

/// Sets every task's kind per the policy (jobs in order, one draw per eligible task).
pub fn assign(jobs: &mut [Job], policy: TaskTypes, seed: u64) {
    let mut rng = seeded(seed, streams::TASK_TYPES);
    for task in jobs.iter_mut().flat_map(|j| j.tasks.iter_mut()) {
        task.kind = match policy {
            TaskTypes::Short => TaskKind::Short,
            TaskTypes::OnlyG => TaskKind::Guaranteed,
            TaskTypes::OnlyQ => TaskKind::Queueable,
            TaskTypes::Hybrid { td, pq } => {
                if task.duration < td && rng.random_bool(pq) {
                    TaskKind::Queueable
                } else {
                    TaskKind::Guaranteed
                }
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use common::{Resources, TaskId, TaskSpec};

    fn jobs() -> Vec<Job> {
        (0..100)
            .map(|j| Job {
                id: j,
                dag: None,
                arrival: Micros(j),
                tasks: (0..10)
                    .map(|i| {
                        let secs = if i < 8 { 2 } else { 50 };
                        TaskSpec::short(
                            TaskId::new(j, i),
                            Resources::cores(1, 1),
                            Micros::from_secs(secs),
                        )
                    })
                    .collect(),
            })
            .collect()
    }

    #[test]
    fn parses_and_prints_policies() {
        for s in [
            "short",
            "only-g",
            "only-q",
            "hybrid:10:0.7",
            "hybrid:inf:0.5",
        ] {
            let p: TaskTypes = s.parse().unwrap();
            assert_eq!(p.to_string(), s);
        }
        assert!("hybrid:10:1.5".parse::<TaskTypes>().is_err());
        assert!("hybrid:-1:0.5".parse::<TaskTypes>().is_err());
        assert!("mixed".parse::<TaskTypes>().is_err());
    }

    #[test]
    fn hybrid_keeps_long_tasks_guaranteed_and_is_seeded() {
        let mut a = jobs();
        assign(&mut a, "hybrid:10:0.7".parse().unwrap(), 7);
        let tasks: Vec<&TaskSpec> = a.iter().flat_map(|j| &j.tasks).collect();
        assert!(tasks
            .iter()
            .filter(|t| t.duration >= Micros::from_secs(10))
            .all(|t| t.kind == TaskKind::Guaranteed));
        let short: Vec<_> = tasks
            .iter()
            .filter(|t| t.duration < Micros::from_secs(10))
            .collect();
        let q = short
            .iter()
            .filter(|t| t.kind == TaskKind::Queueable)
            .count();
        let share = q as f64 / short.len() as f64;
        assert!((0.62..0.78).contains(&share), "{share}");
        let mut b = jobs();
        assign(&mut b, "hybrid:10:0.7".parse().unwrap(), 7);
        let kinds = |js: &[Job]| {
            js.iter()
                .flat_map(|j| j.tasks.iter().map(|t| t.kind))
                .collect::<Vec<_>>()
        };
        assert_eq!(kinds(&a), kinds(&b));
    }
}
