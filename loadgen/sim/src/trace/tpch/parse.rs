//! Reading `tpch-dags.json` into [`TpchDag`]s and validating each one. The whole file
//! is parsed at once (it is about 10 MB; the durations it keeps take about as much),
//! so that jobs can be drawn from any DAG in any order.
//!
//! The file: `{"queries": [{"name", "scale", "query", "stages": [{"stage", "tasks",
//! "first_wave_ms", "rest_wave_ms", "fresh_ms", ...}], "edges": [[parent, child]]}]}`;
//! other keys (`source`, `units`, `mean_ms`) are ignored. Errors name the file and,
//! for JSON that does not fit this shape, the line and the JSON path
//! ([`TraceError::Parse`]); for a DAG that fits but is invalid, the DAG and its field
//! ([`TraceError::Dag`]).

use super::model::{TpchDag, TpchStage};
use crate::trace::topo::{topo_order, TopoError};
use crate::trace::{DagStage, TraceError};
use common::Micros;
use serde::Deserialize;
use std::collections::HashSet;
use std::path::Path;

/// The longest task duration accepted, in milliseconds (one day): anything above is
/// a unit mistake, not a measurement.
pub const MAX_DURATION_MS: f64 = 86_400_000.0;

#[derive(Deserialize)]
struct RawFile {
    queries: Vec<RawDag>,
}

#[derive(Deserialize)]
struct RawDag {
    name: String,
    scale: String,
    query: u32,
    stages: Vec<RawStage>,
    edges: Vec<[u32; 2]>,
}

#[derive(Deserialize)]
struct RawStage {
    stage: u32,
    tasks: u32,
    first_wave_ms: Vec<f64>,
    #[serde(default)]
    rest_wave_ms: Vec<f64>,
    #[serde(default)]
    fresh_ms: Vec<f64>,
}

/// Reads and validates every DAG of the file at `path` (gzipped when its name ends
/// in `.gz`, as the bundled `data/tpch/tpch-dags.json.gz`).
pub fn read_dags(path: &Path) -> Result<Vec<TpchDag>, TraceError> {
    let io = |source| TraceError::Io {
        path: path.to_owned(),
        source,
    };
    let mut bytes = std::fs::read(path).map_err(io)?;
    if path.extension().is_some_and(|e| e == "gz") {
        let mut unpacked = Vec::with_capacity(bytes.len() * 4);
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut unpacked)
            .map_err(io)?;
        bytes = unpacked;
    }
    parse_dags(&bytes, path)
}

/// [`read_dags`] on bytes already read; `path` is only named in errors.
pub fn parse_dags(bytes: &[u8], path: &Path) -> Result<Vec<TpchDag>, TraceError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let raw: RawFile = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        TraceError::Parse {
            path: path.to_owned(),
            line: inner.line() as u64,
            field,
            reason: inner.to_string(),
        }
    })?;
    if raw.queries.is_empty() {
        return Err(TraceError::Parse {
            path: path.to_owned(),
            line: 1,
            field: "queries".to_owned(),
            reason: "the file has no DAGs".to_owned(),
        });
    }
    let mut names = HashSet::new();
    let mut dags = Vec::with_capacity(raw.queries.len());
    for (i, raw_dag) in raw.queries.into_iter().enumerate() {
        let dag_error = |dag: &str, field: String, reason: String| TraceError::Dag {
            path: path.to_owned(),
            dag: dag.to_owned(),
            field,
            reason,
        };
        if raw_dag.name.is_empty() {
            let name = format!("queries[{i}]");
            return Err(dag_error(&name, "name".into(), "is empty".into()));
        }
        if !names.insert(raw_dag.name.clone()) {
            let reason = "another DAG of the file has this name".to_owned();
            return Err(dag_error(&raw_dag.name, "name".into(), reason));
        }
        let name = raw_dag.name.clone();
        dags.push(convert(raw_dag).map_err(|(field, reason)| dag_error(&name, field, reason))?);
    }
    Ok(dags)
}

/// One DAG, validated; errors are (field, reason).
fn convert(raw: RawDag) -> Result<TpchDag, (String, String)> {
    if raw.stages.is_empty() {
        return Err(("stages".into(), "a DAG needs at least one stage".into()));
    }
    let mut stages = Vec::with_capacity(raw.stages.len());
    for (i, s) in raw.stages.into_iter().enumerate() {
        if stages.iter().any(|t: &TpchStage| t.dag.id == s.stage) {
            let reason = format!("stage id {} is used by an earlier stage", s.stage);
            return Err((format!("stages[{i}].stage"), reason));
        }
        stages.push(convert_stage(i, s)?);
    }
    let ids: Vec<u32> = stages.iter().map(|s| s.dag.id).collect();
    let position = |id: u32| ids.iter().position(|&s| s == id);
    for (k, &[parent, child]) in raw.edges.iter().enumerate() {
        let field = || format!("edges[{k}]");
        for end in [parent, child] {
            if position(end).is_none() {
                let reason = format!("names stage {end}, which the DAG does not have");
                return Err((field(), reason));
            }
        }
        if parent == child {
            return Err((field(), format!("stage {child} depends on itself")));
        }
        let Some(c) = position(child) else {
            continue;
        };
        let deps = &mut stages[c].dag.depends_on;
        if deps.contains(&parent) {
            return Err((field(), format!("edge [{parent}, {child}] is listed twice")));
        }
        deps.push(parent);
    }
    let dag_stages: Vec<DagStage> = stages.iter().map(|s| s.dag.clone()).collect();
    match topo_order(&dag_stages) {
        Ok(_) => {}
        Err(TopoError::Cycle(ids)) => {
            let path: Vec<String> = ids.iter().map(|id| id.to_string()).collect();
            let reason = format!("the edges make a cycle: {}", path.join(" -> "));
            return Err(("edges".into(), reason));
        }
        // Both ruled out above; reported all the same rather than assumed.
        Err(other) => return Err(("edges".into(), format!("{other:?}"))),
    }
    Ok(TpchDag {
        name: raw.name,
        scale: raw.scale,
        query: raw.query,
        stages,
    })
}

fn convert_stage(i: usize, s: RawStage) -> Result<TpchStage, (String, String)> {
    let field = |name: &str| format!("stages[{i}].{name}");
    if s.tasks == 0 {
        return Err((field("tasks"), "a stage needs at least 1 task".into()));
    }
    if s.first_wave_ms.is_empty() {
        let reason =
            "no first-wave durations (they stand in for the other kinds when those are empty)";
        return Err((field("first_wave_ms"), reason.into()));
    }
    let durations = |name: &str, ms: &[f64]| -> Result<Vec<Micros>, (String, String)> {
        ms.iter()
            .enumerate()
            .map(|(j, &v)| {
                if v.is_finite() && (0.0..=MAX_DURATION_MS).contains(&v) {
                    Ok(Micros((v * 1000.0).round() as u64))
                } else {
                    let reason = format!("{v} is not a duration in [0, {MAX_DURATION_MS}] ms");
                    Err((format!("{}[{j}]", field(name)), reason))
                }
            })
            .collect()
    };
    Ok(TpchStage {
        dag: DagStage {
            id: s.stage,
            name: format!("s{}", s.stage),
            depends_on: Vec::new(),
        },
        tasks: s.tasks,
        first_wave: durations("first_wave_ms", &s.first_wave_ms)?,
        rest_wave: durations("rest_wave_ms", &s.rest_wave_ms)?,
        fresh: durations("fresh_ms", &s.fresh_ms)?,
    })
}
