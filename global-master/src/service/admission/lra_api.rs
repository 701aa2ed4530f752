//! `POST /v1/lras` body (JSON) and its validation, pure so that every refusal can be
//! table-tested: each names the field at fault (JSON path) and the reason.
//!
//! ```json
//! {"queue": "default",
//!  "containers": [{"resources": {"cpu_millis": 1000, "memory_mb": 2048},
//!                  "tags": ["hb", "hb_w"], "count": 10, "duration_ms": 600000}],
//!  "constraints": [
//!    {"subject_tag": "hb_w", "tag": "hb_w", "c_min": 0, "c_max": 1, "node_group": "node"},
//!    {"subject_tag": "hb_m", "any_of": [[{"tag": "zk", "c_min": 1, "node_group": "rack"}],
//!                                       [{"tag": "hb_t", "c_min": 1, "node_group": "node"}]],
//!     "weight": 1000}]}
//! ```
//! A constraint is either simple (`tag`, `c_min` (default 0), `c_max` (absent: no
//! upper bound), `node_group`) or compound in DNF (`any_of`: a list of conjunctions
//! of such tag constraints). `tag`/`subject_tag` take a tag or a list of tags (a
//! conjunction). `weight` defaults to 1 (soft); `hard: true` emulates a hard
//! constraint (MEDEA 4.2).

use crate::core::lra_path::lra_groups;
use crate::lra::{
    ConstraintError, ContainerRequest, NodeGroupSpec, PlacementConstraint, TagConstraint, TagSet,
};
use crate::service::admission::api::MAX_DURATION_MS;
use crate::service::admission::api::{
    check_duration, check_resources, check_tags, parse_body, ApiError, QueueTable, ResourceRequest,
};
use common::{Micros, QueueId};
use serde::Deserialize;

#[derive(utoipa::ToSchema, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LraBody {
    /// The user queue, by name (see [`QueueTable`]).
    #[serde(default)]
    queue: Option<String>,
    #[schema(min_items = 1)]
    containers: Vec<ContainerBody>,
    #[serde(default)]
    constraints: Vec<ConstraintBody>,
}

#[derive(utoipa::ToSchema, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ContainerBody {
    resources: ResourceRequest,
    #[serde(default)]
    #[schema(max_items = 32)]
    tags: Vec<String>,
    /// Identical containers (default 1).
    #[serde(default = "one")]
    #[schema(minimum = 1)]
    count: u32,
    /// How long each runs once started; default one week (long-running).
    #[serde(default)]
    #[schema(minimum = 0, maximum = 604_800_000)]
    duration_ms: Option<f64>,
}

fn one() -> u32 {
    1
}

/// A tag or a list of tags.
#[derive(utoipa::ToSchema, Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum Tags {
    One(String),
    Many(Vec<String>),
}

impl Tags {
    fn set(&self) -> TagSet {
        match self {
            Tags::One(t) => TagSet::one(t.as_str()),
            Tags::Many(ts) => TagSet::new(ts.iter().map(String::as_str)),
        }
    }
}

#[derive(utoipa::ToSchema, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TagConstraintBody {
    tag: Tags,
    #[serde(default)]
    c_min: u32,
    #[serde(default)]
    c_max: Option<u32>,
    node_group: String,
}

impl TagConstraintBody {
    fn build(&self) -> TagConstraint {
        TagConstraint {
            c_tag: self.tag.set(),
            c_min: self.c_min,
            c_max: self.c_max,
            node_group: self.node_group.clone(),
        }
    }
}

impl ConstraintBody {
    /// The simple form's fields, when any is given.
    fn is_simple(&self) -> bool {
        self.tag.is_some()
            || self.c_min.is_some()
            || self.c_max.is_some()
            || self.node_group.is_some()
    }
}

#[derive(utoipa::ToSchema, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConstraintBody {
    subject_tag: Tags,
    #[serde(default)]
    tag: Option<Tags>,
    #[serde(default)]
    c_min: Option<u32>,
    #[serde(default)]
    c_max: Option<u32>,
    #[serde(default)]
    node_group: Option<String>,
    #[serde(default)]
    any_of: Option<Vec<Vec<TagConstraintBody>>>,
    #[serde(default)]
    weight: Option<f64>,
    #[serde(default)]
    hard: bool,
}

/// A validated LRA, before the GM gives it an id.
#[derive(Debug, Clone, PartialEq)]
pub struct NewLra {
    pub queue: QueueId,
    pub containers: Vec<ContainerRequest>,
    pub durations: Vec<Micros>,
    pub constraints: Vec<PlacementConstraint>,
}

/// Parses and validates an LRA of at most `max_containers` containers whose queue is
/// one of `queues` (any GM's: LRAs are placed by the designated GM) and whose
/// constraints name `node`, `rack` or one of the operator's `groups`.
pub fn parse_lra(
    body: &[u8],
    max_containers: usize,
    queues: &QueueTable,
    groups: &[NodeGroupSpec],
) -> Result<NewLra, ApiError> {
    let lra: LraBody = parse_body(body)?;
    let queue = queues.resolve_at("queue".into(), lra.queue.as_deref(), true)?;
    if lra.containers.is_empty() {
        return Err(ApiError::new(
            422,
            "containers",
            "an LRA needs at least one container",
        ));
    }
    // Every container's fields first, then their total: an LRA with a bad field is
    // refused for that field (422) whatever its size (found by schemathesis: a
    // `count` of 0 next to a large one answered 413).
    let mut checked = Vec::new();
    for (i, c) in lra.containers.iter().enumerate() {
        let field = |name: &str| format!("containers[{i}].{name}");
        let resources = check_resources(&field("resources"), &c.resources)?;
        check_tags(&field("tags"), &c.tags)?;
        if c.count == 0 {
            return Err(ApiError::new(422, field("count"), "must be at least 1"));
        }
        let duration = check_duration(
            &field("duration_ms"),
            c.duration_ms.unwrap_or(MAX_DURATION_MS),
        )?;
        checked.push((resources, duration));
    }
    let total: u64 = lra.containers.iter().map(|c| u64::from(c.count)).sum();
    if total > max_containers as u64 {
        return Err(ApiError::new(
            413,
            "containers",
            format!("{total} containers in one LRA; at most {max_containers} are accepted"),
        ));
    }
    let mut containers = Vec::new();
    let mut durations = Vec::new();
    for (c, (resources, duration)) in lra.containers.iter().zip(checked) {
        for _ in 0..c.count {
            containers.push(ContainerRequest::new(
                resources,
                c.tags.iter().map(String::as_str),
            ));
            durations.push(duration);
        }
    }
    let constraints = build_all("constraints", &lra.constraints, groups)?;
    Ok(NewLra {
        queue,
        containers,
        durations,
        constraints,
    })
}

/// Builds and validates constraints; errors name `{prefix}[i].field`.
fn build_all(
    prefix: &str,
    bodies: &[ConstraintBody],
    groups: &[NodeGroupSpec],
) -> Result<Vec<PlacementConstraint>, ApiError> {
    let groups = lra_groups(groups);
    bodies
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let field = format!("{prefix}[{i}]");
            let constraint = build_constraint(&field, c)?;
            constraint
                .validate(groups.groups())
                .map_err(|e| constraint_error(&field, c.is_simple(), &e))?;
            Ok(constraint)
        })
        .collect()
}

/// Operator constraints (MEDEA section 3): a JSON list of constraints in the
/// `POST /v1/lras` format, over node groups `node`, `rack` and `groups`.
pub fn parse_operator_constraints(
    body: &[u8],
    groups: &[NodeGroupSpec],
) -> Result<Vec<PlacementConstraint>, ApiError> {
    let bodies: Vec<ConstraintBody> = parse_body(body)?;
    build_all("", &bodies, groups)
}

/// Operator-defined node groups: a JSON list of `{"name": ..., "sets": [[node, ...],
/// ...]}` over the placer's node numbering (LM by LM, node-id order). Checked for
/// reserved or repeated names and overlapping sets.
pub fn parse_node_groups(body: &[u8]) -> Result<Vec<NodeGroupSpec>, ApiError> {
    let groups: Vec<NodeGroupSpec> = parse_body(body)?;
    crate::core::lra_path::group_names(&groups)
        .map_err(|e| ApiError::new(422, "groups", e.to_string()))?;
    Ok(groups)
}

fn build_constraint(field: &str, c: &ConstraintBody) -> Result<PlacementConstraint, ApiError> {
    let any_of = match (c.is_simple(), &c.any_of) {
        (true, None) => {
            let (Some(tag), Some(group)) = (&c.tag, &c.node_group) else {
                let missing = if c.tag.is_none() { "tag" } else { "node_group" };
                return Err(ApiError::new(
                    422,
                    format!("{field}.{missing}"),
                    "a simple constraint needs tag and node_group",
                ));
            };
            vec![vec![TagConstraint {
                c_tag: tag.set(),
                c_min: c.c_min.unwrap_or(0),
                c_max: c.c_max,
                node_group: group.clone(),
            }]]
        }
        (false, Some(clauses)) => clauses
            .iter()
            .map(|clause| clause.iter().map(TagConstraintBody::build).collect())
            .collect(),
        (true, Some(_)) => {
            return Err(ApiError::new(
                422,
                format!("{field}.any_of"),
                "give either tag/c_min/c_max/node_group or any_of, not both",
            ))
        }
        (false, None) => {
            return Err(ApiError::new(
                422,
                format!("{field}.tag"),
                "a constraint needs tag and node_group (or any_of)",
            ))
        }
    };
    let weight = match (c.hard, c.weight) {
        (true, _) => crate::lra::HARD_WEIGHT,
        (false, Some(w)) => w,
        (false, None) => crate::lra::constraints::DEFAULT_WEIGHT,
    };
    Ok(PlacementConstraint {
        subject: c.subject_tag.set(),
        any_of,
        weight,
    })
}

/// Names the API field of a constraint error (a simple constraint's fields are at the
/// top level of the constraint, not under `any_of[0][0]`).
fn constraint_error(field: &str, simple: bool, e: &ConstraintError) -> ApiError {
    let inner = match e {
        ConstraintError::EmptyTag { field }
        | ConstraintError::MinAboveMax { field, .. }
        | ConstraintError::UnknownNodeGroup { field, .. }
        | ConstraintError::EmptyExpression { field } => field.replace("c_tag", "tag"),
        ConstraintError::BadWeight { .. } => "weight".to_owned(),
        ConstraintError::InApplication { .. } => String::new(),
    };
    let inner = match e {
        ConstraintError::MinAboveMax { .. } => format!("{inner}.c_min"),
        _ => inner,
    };
    let inner = if simple {
        inner.trim_start_matches("any_of[0][0].").to_owned()
    } else {
        inner
    };
    let path = if inner.is_empty() {
        field.to_owned()
    } else {
        format!("{field}.{inner}")
    };
    // The message names the field as the API spells it too.
    let mut message = e.to_string().replace(".c_tag`", ".tag`");
    if simple {
        message = message
            .replace("`any_of[0][0].", "`")
            .replace("`any_of[0][0]`", "`c_min`");
    }
    ApiError::new(422, path, message)
}

#[cfg(test)]
mod tests;
