//! The stages of a DAG job in the public API: `stages` of `POST /v1/jobs` (names,
//! edges `after`, what a stage does when a parent failed) and each task's `stage`,
//! checked and turned into the core's [`JobDag`] (stages by number). A DAG that
//! cannot run (an unknown stage, a self edge, a cycle, a stage without a task) is
//! a 400 naming the field; nothing of the job is accepted.

use super::error::ApiError;
use common::dag::{AfterJob, AfterWhen, DagError, JobDag, OnParentFailure, Stage, MAX_STAGES};
use common::{JobId, TaskKind};
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Arc;

/// One stage of a DAG job: `{"name": "reduce", "after": ["map"]}`.
#[derive(utoipa::ToSchema, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageRequest {
    /// 1 to 64 bytes of letters, digits, `-`, `_` and `.`; unique in its job.
    #[schema(min_length = 1, max_length = 64, pattern = r"^[A-Za-z0-9_.-]+$")]
    pub name: String,
    /// Parent stages: this stage's tasks are queued once every task of each ended.
    #[serde(default)]
    pub after: Vec<String>,
    /// When a parent stage failed (one of its tasks failed past its retries, or it
    /// never ran): `fail` (the default: this stage's tasks fail without running,
    /// "parent stage X failed") or `continue` (it runs once every parent ended).
    #[serde(default)]
    #[schema(value_type = String)]
    pub on_parent_failure: OnParentFailure,
}

/// Another job this one runs after: `{"job": 281474976710657, "when": "ok"}`.
#[derive(utoipa::ToSchema, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AfterJobRequest {
    /// A job of the same GM (its id names its GM) that the caller may read.
    pub job: u64,
    /// `ok` (the default: once it finished), `any` (once it ended), `failed` (once
    /// it failed or was cancelled); otherwise this job ends failed without running.
    #[serde(default)]
    #[schema(value_type = String)]
    pub when: AfterWhen,
}

/// Jobs one job may run after, at most.
pub const MAX_AFTER_JOBS: usize = 64;
/// The stage of a job that names `after_jobs` and no `stages`: every task is in it.
pub const WHOLE_JOB_STAGE: &str = "job";

const MAX_NAME: usize = 64;

fn valid_name(name: &str) -> bool {
    (1..=MAX_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The jobs a job runs after: at most [`MAX_AFTER_JOBS`], each named once.
fn check_after_jobs(after: &[AfterJobRequest]) -> Result<Vec<AfterJob>, ApiError> {
    if after.len() > MAX_AFTER_JOBS {
        return Err(ApiError::new(
            400,
            "after_jobs",
            format!("at most {MAX_AFTER_JOBS} jobs"),
        ));
    }
    let mut out: Vec<AfterJob> = Vec::with_capacity(after.len());
    for (i, a) in after.iter().enumerate() {
        if out.iter().any(|o| o.job.0 == a.job) {
            return Err(ApiError::new(
                400,
                format!("after_jobs[{i}].job"),
                format!("job {} is named twice", a.job),
            ));
        }
        out.push(AfterJob {
            job: JobId(a.job),
            when: a.when,
        });
    }
    Ok(out)
}

/// The job's DAG, from its `stages`, each task's `stage` (`task_stages`, and
/// `kinds`, in task order) and the jobs it runs after. No `stages`: no task may
/// name a stage; with `after_jobs`, every task is in one stage, `job`; without,
/// no DAG.
pub fn check_stages(
    stages: Option<&[StageRequest]>,
    after_jobs: Option<&[AfterJobRequest]>,
    task_stages: &[Option<String>],
    kinds: &[TaskKind],
) -> Result<Option<Arc<JobDag>>, ApiError> {
    let after_jobs = check_after_jobs(after_jobs.unwrap_or_default())?;
    let Some(stages) = stages else {
        if let Some(i) = task_stages.iter().position(Option::is_some) {
            return Err(ApiError::new(
                400,
                format!("tasks[{i}].stage"),
                "the job declares no `stages`: declare the stage in `stages`, or leave it out",
            ));
        }
        if after_jobs.is_empty() {
            return Ok(None);
        }
        if let Some(i) = kinds.iter().position(|k| *k == TaskKind::LongRunning) {
            return Err(ApiError::new(
                400,
                format!("tasks[{i}].kind"),
                "a long_running task cannot run after other jobs (it never ends)",
            ));
        }
        return Ok(Some(Arc::new(JobDag {
            stages: vec![Stage {
                name: WHOLE_JOB_STAGE.into(),
                after: Vec::new(),
                on_parent_failure: OnParentFailure::Fail,
            }],
            task_stage: vec![0; task_stages.len()],
            after_jobs,
        })));
    };
    if stages.is_empty() || stages.len() > MAX_STAGES {
        return Err(ApiError::new(
            400,
            "stages",
            format!("1 to {MAX_STAGES} stages, or leave `stages` out"),
        ));
    }
    let mut number = HashMap::with_capacity(stages.len());
    for (i, s) in stages.iter().enumerate() {
        if !valid_name(&s.name) {
            return Err(ApiError::new(
                400,
                format!("stages[{i}].name"),
                format!("1 to {MAX_NAME} bytes of letters, digits, `-`, `_` and `.`"),
            ));
        }
        if number.insert(s.name.as_str(), i as u16).is_some() {
            return Err(ApiError::new(
                400,
                format!("stages[{i}].name"),
                format!("stage `{}` is declared twice", s.name),
            ));
        }
    }
    let mut dag_stages = Vec::with_capacity(stages.len());
    for (i, s) in stages.iter().enumerate() {
        let mut after = Vec::with_capacity(s.after.len());
        for (j, parent) in s.after.iter().enumerate() {
            let field = format!("stages[{i}].after[{j}]");
            let Some(&p) = number.get(parent.as_str()) else {
                return Err(ApiError::new(
                    400,
                    field,
                    format!("unknown stage `{parent}`"),
                ));
            };
            if usize::from(p) == i {
                return Err(ApiError::new(
                    400,
                    field,
                    "a stage cannot come after itself",
                ));
            }
            if after.contains(&p) {
                return Err(ApiError::new(
                    400,
                    field,
                    format!("stage `{parent}` is named twice"),
                ));
            }
            after.push(p);
        }
        dag_stages.push(Stage {
            name: s.name.as_str().into(),
            after,
            on_parent_failure: s.on_parent_failure,
        });
    }
    let mut task_stage = Vec::with_capacity(task_stages.len());
    for (i, stage) in task_stages.iter().enumerate() {
        let field = format!("tasks[{i}].stage");
        let Some(name) = stage else {
            return Err(ApiError::new(
                400,
                field,
                "required: the job declares `stages`, so each task names its stage",
            ));
        };
        let Some(&s) = number.get(name.as_str()) else {
            return Err(ApiError::new(400, field, format!("unknown stage `{name}`")));
        };
        if kinds.get(i) == Some(&TaskKind::LongRunning) {
            return Err(ApiError::new(
                400,
                format!("tasks[{i}].kind"),
                "a long_running task cannot be in a stage of a DAG job (it never ends)",
            ));
        }
        task_stage.push(s);
    }
    let dag = JobDag {
        stages: dag_stages,
        task_stage,
        after_jobs,
    };
    dag.check(task_stages.len()).map_err(|e| match e {
        DagError::Cycle { stage } => ApiError::new(
            400,
            format!("stages[{stage}].after"),
            format!(
                "the stages form a cycle through stage `{}`",
                stages[stage].name
            ),
        ),
        DagError::EmptyStage { stage } => ApiError::new(
            400,
            format!("stages[{stage}]"),
            format!("no task is in stage `{}`", stages[stage].name),
        ),
        other => ApiError::new(400, "stages", other.to_string()),
    })?;
    Ok(Some(Arc::new(dag)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stage(name: &str, after: &[&str]) -> StageRequest {
        StageRequest {
            name: name.into(),
            after: after.iter().map(|s| s.to_string()).collect(),
            on_parent_failure: OnParentFailure::Fail,
        }
    }

    fn names(stages: &[&str]) -> Vec<Option<String>> {
        stages.iter().map(|s| Some(s.to_string())).collect()
    }

    fn check(stages: &[StageRequest], tasks: &[&str]) -> Result<Option<Arc<JobDag>>, ApiError> {
        let kinds = vec![TaskKind::Short; tasks.len()];
        check_stages(Some(stages), None, &names(tasks), &kinds)
    }

    fn refused(stages: &[StageRequest], tasks: &[&str]) -> (u16, String, String) {
        let e = check(stages, tasks).unwrap_err();
        (e.status, e.field, e.error)
    }

    #[test]
    fn a_diamond_becomes_stage_numbers() {
        let dag = check(
            &[
                stage("a", &[]),
                stage("b", &["a"]),
                stage("c", &["a"]),
                stage("d", &["b", "c"]),
            ],
            &["a", "a", "b", "c", "d"],
        )
        .unwrap()
        .unwrap();
        assert_eq!(dag.task_stage, [0, 0, 1, 2, 3]);
        assert_eq!(dag.stages[3].after, [1, 2]);
        assert_eq!(&*dag.stages[3].name, "d");
    }

    #[test]
    fn bad_dags_are_refused_naming_the_field() {
        let ab = [stage("a", &[]), stage("b", &["a"])];
        let cases: Vec<(Vec<StageRequest>, Vec<&str>, &str, &str)> = vec![
            (
                vec![stage("a", &["b"]), stage("b", &["a"])],
                vec!["a", "b"],
                "stages[0].after",
                "cycle",
            ),
            (
                vec![stage("a", &["a"])],
                vec!["a"],
                "stages[0].after[0]",
                "itself",
            ),
            (
                vec![stage("a", &[]), stage("b", &["x"])],
                vec!["a", "b"],
                "stages[1].after[0]",
                "unknown stage `x`",
            ),
            (
                vec![stage("a", &[]), stage("b", &["a", "a"])],
                vec!["a", "b"],
                "stages[1].after[1]",
                "twice",
            ),
            (
                vec![stage("a", &[]), stage("a", &[])],
                vec!["a"],
                "stages[1].name",
                "declared twice",
            ),
            (
                vec![stage("a b", &[])],
                vec!["a b"],
                "stages[0].name",
                "letters",
            ),
            (
                ab.iter().map(|s| stage(&s.name, &[])).collect(),
                vec!["a", "a"],
                "stages[1]",
                "no task",
            ),
            (
                vec![stage("a", &[])],
                vec!["z"],
                "tasks[0].stage",
                "unknown stage `z`",
            ),
            (vec![], vec![], "stages", "1 to"),
        ];
        for (stages, tasks, field, says) in cases {
            let (status, f, error) = refused(&stages, &tasks);
            assert_eq!((status, f.as_str()), (400, field), "{error}");
            assert!(error.contains(says), "{field}: {error}");
        }
        // A task without a stage in a DAG job; a stage named without `stages`.
        let e = check_stages(
            Some(&[stage("a", &[])]),
            None,
            &[Some("a".into()), None],
            &[TaskKind::Short; 2],
        )
        .unwrap_err();
        assert_eq!(e.field, "tasks[1].stage");
        let e =
            check_stages(None, None, &[None, Some("a".into())], &[TaskKind::Short; 2]).unwrap_err();
        assert_eq!(e.field, "tasks[1].stage");
        assert_eq!(
            check_stages(None, None, &[None], &[TaskKind::Short]),
            Ok(None)
        );
        let e = check_stages(
            Some(&[stage("a", &[])]),
            None,
            &names(&["a"]),
            &[TaskKind::LongRunning],
        )
        .unwrap_err();
        assert_eq!(e.field, "tasks[0].kind");
    }

    #[test]
    fn after_jobs_put_a_job_without_stages_in_one_stage_and_are_checked() {
        let after = |job, when| AfterJobRequest { job, when };
        let dag = check_stages(
            None,
            Some(&[after(7, AfterWhen::Ok), after(8, AfterWhen::Failed)]),
            &[None, None],
            &[TaskKind::Short; 2],
        )
        .unwrap()
        .unwrap();
        assert_eq!(dag.task_stage, [0, 0]);
        assert_eq!(&*dag.stages[0].name, WHOLE_JOB_STAGE);
        assert_eq!(
            dag.after_jobs,
            [
                AfterJob {
                    job: JobId(7),
                    when: AfterWhen::Ok
                },
                AfterJob {
                    job: JobId(8),
                    when: AfterWhen::Failed
                }
            ]
        );
        let e = check_stages(
            None,
            Some(&[after(7, AfterWhen::Ok), after(7, AfterWhen::Any)]),
            &[None],
            &[TaskKind::Short],
        )
        .unwrap_err();
        assert_eq!((e.status, e.field.as_str()), (400, "after_jobs[1].job"));
        // With stages, the stages without parents wait for the jobs.
        let dag = check_stages(
            Some(&[stage("a", &[]), stage("b", &["a"])]),
            Some(&[after(7, AfterWhen::Any)]),
            &names(&["a", "b"]),
            &[TaskKind::Short; 2],
        )
        .unwrap()
        .unwrap();
        assert_eq!(dag.after_jobs.len(), 1);
        assert_eq!(dag.stages.len(), 2);
    }
}
