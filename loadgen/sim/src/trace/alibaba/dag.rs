//! The DAG encoded in Alibaba 2018 task names: a letter prefix, the task's own id,
//! then the ids of the tasks it depends on, separated by `_`. `M1` is task 1 with no
//! dependencies, `R2_1` is task 2 after task 1, `J3_1_2` is task 3 after tasks 1 and
//! 2. Names that do not follow the pattern (`task_Nzg3ODAwNDgzMTAwNTc2NTQ2Mw==`,
//! `MergeTask`) carry no DAG.

/// The DAG part of a task name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DagName {
    pub id: u32,
    pub depends_on: Vec<u32>,
}

/// Parses `M1`, `R2_1`, `J3_1_2`, ...; `None` for names without a DAG.
pub fn parse_dag_name(name: &str) -> Option<DagName> {
    let digits_at = name.find(|c: char| !c.is_ascii_alphabetic())?;
    if digits_at == 0 {
        return None;
    }
    let mut ids = name[digits_at..].split('_').map(|part| {
        if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
            None
        } else {
            part.parse::<u32>().ok()
        }
    });
    let id = ids.next()??;
    let depends_on = ids.collect::<Option<Vec<u32>>>()?;
    Some(DagName { id, depends_on })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dag(id: u32, deps: &[u32]) -> Option<DagName> {
        Some(DagName {
            id,
            depends_on: deps.to_vec(),
        })
    }

    #[test]
    fn parses_ids_and_dependencies() {
        assert_eq!(parse_dag_name("M1"), dag(1, &[]));
        assert_eq!(parse_dag_name("R2_1"), dag(2, &[1]));
        assert_eq!(parse_dag_name("J3_1_2"), dag(3, &[1, 2]));
        assert_eq!(parse_dag_name("MapTask12_3"), dag(12, &[3]));
    }

    #[test]
    fn names_without_a_dag() {
        for name in [
            "task_Nzg3ODAw",
            "MergeTask",
            "",
            "12_1",
            "M",
            "M1_",
            "M1__2",
            "M1_x",
            "M99999999999",
        ] {
            assert_eq!(parse_dag_name(name), None, "{name}");
        }
    }
}
