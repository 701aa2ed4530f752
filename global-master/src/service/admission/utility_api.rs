//! A job's `utility` (alsched soft constraints, issue 36; docs/alsched.md): its
//! utility tree, parsed and compiled for the job's task count. A refusal is a 400
//! whose `field` is the JSON path of the bad node (`utility.max[1].nCk.set`).
//!
//! Attribute names: those of the GM's `--cluster-file` (a described cluster), else
//! Megha's numbered constraints as `c0` .. `c63`
//! ([`common::attributes::Attributes::numbered`]).

use super::error::ApiError;
use common::attributes::Attributes;
use common::utility::{compile, Utility, UtilityTree};
use common::TaskKind;
use std::sync::Arc;

/// The compiled tree of a job of `tasks` tasks (`None` without one).
pub fn check_utility(
    utility: Option<serde_json::Value>,
    tasks: usize,
    names: &Attributes,
) -> Result<Option<Arc<Utility>>, ApiError> {
    let Some(value) = utility else {
        return Ok(None);
    };
    let tree: UtilityTree = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let field = match path.as_str() {
            "." | "?" => "utility".to_owned(),
            p => format!("utility.{p}"),
        };
        ApiError::new(400, field, e.inner().to_string())
    })?;
    let tasks = u32::try_from(tasks).unwrap_or(u32::MAX);
    let utility = compile(&tree, names, tasks, "utility")
        .map_err(|e| ApiError::new(400, e.path, e.reason))?;
    Ok(Some(Arc::new(utility)))
}

/// A tree is refused on a job with long-running (LRA) tasks: the LRA placer (MEDEA's
/// ILP) places the whole LRA at once by its tag constraints and does not read trees,
/// and a preference it would silently drop is worse than a clear refusal. The job's
/// node preferences go in its tasks' `constraints` (hard) or in MEDEA placement
/// constraints; its other kinds follow trees (GUARANTEED and short tasks by the pass,
/// QUEUEABLE by the best branch's set).
pub fn check_tree_kinds(kinds: &[TaskKind], has_tree: bool) -> Result<(), ApiError> {
    if !has_tree {
        return Ok(());
    }
    match kinds.iter().position(|k| *k == TaskKind::LongRunning) {
        Some(i) => Err(ApiError::new(
            400,
            "utility",
            format!(
                "tasks[{i}] is long-running (an LRA container), and the LRA placer does not follow utility trees: \
                 give its node preferences as `constraints` or MEDEA placement constraints, or drop `utility`"
            ),
        )),
        None => Ok(()),
    }
}

/// The tree of a job from its spec as submitted (the `POST /v1/jobs` body the
/// journal keeps): how a restarted GM gives a resumed job its tree back. `None` for a
/// spec without one, or one that no longer parses (it was valid when accepted).
pub fn utility_of_spec(body: &[u8], names: &Attributes) -> Option<Arc<Utility>> {
    let mut value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let tasks = value.get("tasks")?.as_array()?.len();
    let utility = value.as_object_mut()?.remove("utility")?;
    check_utility(Some(utility), tasks, names).ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_tree_is_a_400_naming_the_path_of_its_bad_node() {
        let table: &[(&str, Option<(&str, &str)>)] = &[
            (r#"{"prefer": {"set": "c17"}}"#, None),
            (
                r#"{"max": [{"nCk": {"set": "c1", "k": 1, "u": 1}}, {"nCk": {"set": "gpux", "k": 1, "u": 1}}]}"#,
                Some(("utility.max[1].nCk.set", r#"unknown attribute "gpux""#)),
            ),
            (
                r#"{"nCk": {"set": "c1", "k": 9, "u": 1}}"#,
                Some(("utility.nCk.k", "k = 9 is more than the job's 2 tasks")),
            ),
            (r#"{"maximum": []}"#, Some(("utility", "unknown variant"))),
        ];
        for (json, want) in table {
            let value: serde_json::Value = serde_json::from_str(json).expect("test json");
            match (check_utility(Some(value), 2, &Attributes::numbered()), want) {
                (Ok(Some(_)), None) => {}
                (Err(e), Some((field, error))) => {
                    assert_eq!(e.status, 400, "{json}");
                    assert_eq!(e.field, *field, "{json}");
                    assert!(e.error.contains(error), "{json}: {}", e.error);
                }
                (got, _) => panic!("{json}: {got:?}"),
            }
        }
        assert_eq!(check_utility(None, 2, &Attributes::numbered()), Ok(None));
    }

    #[test]
    fn a_tree_on_a_job_with_an_lra_task_is_refused_naming_the_task() {
        use TaskKind::*;
        let e = check_tree_kinds(&[Short, LongRunning], true).expect_err("refused");
        assert_eq!((e.status, e.field.as_str()), (400, "utility"));
        assert!(e.error.contains("tasks[1] is long-running"), "{}", e.error);
        for kinds in [&[Short, Guaranteed, Queueable][..], &[]] {
            assert_eq!(check_tree_kinds(kinds, true), Ok(()));
        }
        assert_eq!(check_tree_kinds(&[LongRunning], false), Ok(()));
    }

    #[test]
    fn a_stored_spec_gives_its_tree_back() {
        let with = br#"{"tasks": [{}, {}, {}], "utility": {"nCk": {"set": "c2", "k": 3, "u": 1}}}"#;
        let tree = utility_of_spec(with, &Attributes::numbered()).expect("a tree");
        assert_eq!(tree.leaves[0].k, 3, "compiled for the job's 3 tasks");
        for without in [
            &br#"{"tasks": [{}]}"#[..],
            b"{",
            br#"{"tasks": 1, "utility": {}}"#,
        ] {
            assert!(utility_of_spec(without, &Attributes::numbered()).is_none());
        }
    }
}
