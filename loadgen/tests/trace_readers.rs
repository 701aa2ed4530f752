//! The Alibaba and Google readers on hand-written fixtures: exact counts, DAG edges,
//! resources, constraint ids, and errors naming the line and field.

#![allow(clippy::unwrap_used)] // tests may unwrap

use common::{ConstraintSet, Micros, Resources};
use loadgen::trace::alibaba::{AlibabaConfig, AlibabaReader, AlibabaTable};
use loadgen::trace::google::{GoogleConfig, GoogleFormat, GoogleReader};
use loadgen::trace::{DagStage, ReadReport, TraceError, TraceJob};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

const ALIBABA: AlibabaConfig = AlibabaConfig {
    machine_memory_mb: 100_000,
    max_instances_per_task: 1000,
};

fn alibaba(name: &str, table: AlibabaTable) -> (Vec<TraceJob>, ReadReport) {
    let mut reader = AlibabaReader::open(&fixture(name), table, ALIBABA).unwrap();
    let jobs: Vec<TraceJob> = reader.by_ref().map(Result::unwrap).collect();
    (jobs, reader.report().clone())
}

fn stage(id: u32, name: &str, deps: &[u32]) -> DagStage {
    DagStage {
        id,
        name: name.to_owned(),
        depends_on: deps.to_vec(),
    }
}

#[test]
fn alibaba_task_table_counts_and_dag() {
    let (jobs, report) = alibaba("alibaba_batch_task.csv", AlibabaTable::Task);
    let sizes: Vec<usize> = jobs.iter().map(|j| j.tasks.len()).collect();
    assert_eq!(sizes, vec![6, 7, 1, 5, 2, 1, 1, 3, 1, 1, 1, 2]);
    assert_eq!(
        jobs.iter().map(|j| j.id).collect::<Vec<_>>(),
        (0..12).collect::<Vec<_>>()
    );
    assert_eq!((report.records, report.jobs, report.tasks), (28, 12, 31));

    let j1 = &jobs[0];
    assert_eq!(j1.arrival, Micros::from_secs(100));
    assert_eq!(
        j1.stages,
        vec![
            stage(1, "M1", &[]),
            stage(2, "R2_1", &[1]),
            stage(3, "J3_1_2", &[1, 2])
        ]
    );
    let stages: Vec<Option<u32>> = j1.tasks.iter().map(|t| t.stage).collect();
    assert_eq!(
        stages,
        vec![Some(1), Some(1), Some(1), Some(2), Some(2), Some(3)]
    );
    assert_eq!(j1.tasks[0].duration, Micros::from_secs(60));
    assert_eq!(j1.tasks[0].resources, Some(Resources::new(1000, 390)));
    assert_eq!(j1.tasks[3].resources, Some(Resources::new(500, 1180)));

    let j2 = &jobs[1];
    assert!(j2.stages.is_empty() && j2.tasks.iter().all(|t| t.stage.is_none()));
    assert_eq!(j2.arrival, Micros::from_secs(50));
    assert_eq!(j2.tasks.iter().filter(|t| t.resources.is_none()).count(), 6);

    // j_3: R4_2's dependency on the dropped M2 is removed; j_5: R3_1_2 keeps only 1.
    assert_eq!(jobs[2].stages, vec![stage(4, "R4_2", &[])]);
    assert_eq!(
        jobs[3].stages,
        vec![stage(1, "M1", &[]), stage(3, "R3_1_2", &[1])]
    );
    // j_1 again after other jobs: emitted separately and reported.
    assert_eq!(jobs[5].stages, vec![stage(5, "M5", &[])]);
    assert_eq!(jobs[5].arrival, Micros::from_secs(90));

    let dropped = [
        ("status: Failed", 2),
        ("status: Running", 1),
        ("status: Cancelled", 1),
        ("status: Waiting", 1),
        ("status: Interrupted", 1),
        ("start_time: -1", 1),
        ("end_time before start_time", 1),
        ("instance_num: not a positive integer", 1),
        ("job_name: empty", 1),
        ("job with no kept rows", 3),
    ];
    for (reason, n) in dropped {
        assert_eq!(report.dropped_for(reason), n, "{reason}: {report}");
    }
    assert_eq!(report.dropped.len(), dropped.len(), "{report}");
    assert_eq!(report.caveat_for("plan_cpu: empty (resources unknown)"), 2);
    assert_eq!(report.caveat_for("plan_mem: 101 (resources unknown)"), 1);
    assert_eq!(report.caveat_for("plan_mem: -1 (resources unknown)"), 1);
    assert_eq!(report.caveat_for("plan_mem: empty (resources unknown)"), 1);
    assert_eq!(
        report.caveat_for("dag: dependency on a stage with no kept rows (edge dropped)"),
        2
    );
    assert_eq!(report.limit_for("job rows not contiguous"), 1);
    // j_2 (50 s) after j_1 (100 s), j_6 and the second j_1 group after j_5.
    assert_eq!(report.limit_for("job arrival out of order"), 3);
}

#[test]
fn alibaba_instance_table_counts() {
    let (jobs, report) = alibaba("alibaba_batch_instance.csv", AlibabaTable::Instance);
    assert_eq!(
        jobs.iter().map(|j| j.tasks.len()).collect::<Vec<_>>(),
        vec![5, 1, 4]
    );
    assert_eq!((report.records, report.jobs, report.tasks), (13, 3, 10));
    assert_eq!(
        jobs[0].stages,
        vec![stage(1, "M1", &[]), stage(2, "R2_1", &[1])]
    );
    assert_eq!(jobs[0].tasks[0].resources, Some(Resources::new(950, 350)));
    assert_eq!(jobs[0].tasks[2].duration, Micros::from_secs(40));
    assert_eq!(jobs[0].tasks[4].resources, None);
    assert_eq!(
        jobs[2].stages,
        vec![
            stage(1, "M1", &[]),
            stage(2, "M2", &[]),
            stage(3, "J3_1_2", &[1, 2])
        ]
    );
    assert_eq!(jobs[2].arrival, Micros::from_secs(400));
    assert_eq!(report.dropped_for("status: Failed"), 1);
    assert_eq!(report.dropped_for("status: Running"), 1);
    assert_eq!(report.dropped_for("end_time: -1"), 1);
    assert_eq!(report.dropped_total(), 3);
    assert_eq!(report.caveat_for("cpu_max: empty (resources unknown)"), 1);
    assert_eq!(report.caveat_for("mem_max: empty (resources unknown)"), 1);
    assert_eq!(report.caveat_for("mem_max: 101 (resources unknown)"), 1);
    assert_eq!(report.caveat_for("cpu_max: -1 (resources unknown)"), 1);
    assert_eq!(report.limit_for("job arrival out of order"), 1);
}

fn first_error<I: Iterator<Item = Result<TraceJob, TraceError>>>(it: I) -> String {
    it.filter_map(Result::err)
        .next()
        .expect("an error")
        .to_string()
}

#[test]
fn alibaba_malformed_rows_name_line_and_field() {
    let read = |text: &str, table| {
        first_error(AlibabaReader::new(
            text.as_bytes(),
            Path::new("t.csv"),
            table,
            ALIBABA,
        ))
    };
    let text = "M1,1,j_1,1,Terminated,1,2,100,0.5\nM1,1,j_1,1,Terminated,1,2,abc,0.5\n";
    assert_eq!(
        read(text, AlibabaTable::Task),
        "t.csv:2: field `plan_cpu`: \"abc\" is not a number"
    );
    let err = read("M1,1,j_1\n", AlibabaTable::Task);
    assert_eq!(err, "t.csv:1: field `columns`: expected 9 columns, found 3");
    let err = read(
        "i,M1,j,1,Terminated,x,2,m,1,1,1,1,1,1\n",
        AlibabaTable::Instance,
    );
    assert!(err.starts_with("t.csv:1: field `start_time`"), "{err}");
}

#[test]
fn alibaba_error_after_a_job_boundary_keeps_the_finished_job() {
    let text = "M1,1,j_1,1,Terminated,1,2,100,0.5\nM1,1,j_2,1,Terminated,x,2,100,0.5\n";
    let out: Vec<_> =
        AlibabaReader::new(text.as_bytes(), Path::new("t"), AlibabaTable::Task, ALIBABA).collect();
    assert_eq!(out.len(), 2);
    assert_eq!(out[0].as_ref().unwrap().tasks.len(), 1);
    assert!(out[1].is_err());
}

fn google(name: &str, format: GoogleFormat, cfg: GoogleConfig) -> (Vec<TraceJob>, ReadReport) {
    let mut reader = GoogleReader::open(&fixture(name), format, cfg).unwrap();
    let jobs: Vec<TraceJob> = reader.by_ref().map(Result::unwrap).collect();
    (jobs, reader.report().clone())
}

const GOOGLE: GoogleConfig = GoogleConfig {
    machine_cpu_millis: 10_000,
    machine_memory_mb: 1000,
    max_open_jobs: 100,
};

fn check_google(jobs: &[TraceJob], report: &ReadReport) {
    assert_eq!(
        jobs.iter().map(|j| j.id).collect::<Vec<_>>(),
        vec![1, 4, 6, 2]
    );
    assert_eq!(
        jobs.iter().map(|j| j.tasks.len()).collect::<Vec<_>>(),
        vec![2, 1, 1, 1]
    );
    assert_eq!((report.records, report.jobs, report.tasks), (37, 4, 5));
    let c1 = &jobs[0];
    assert_eq!(c1.arrival, Micros(1000));
    assert_eq!(c1.tasks[0].duration, Micros(3000));
    assert_eq!(c1.tasks[1].duration, Micros(3000), "EVICT resets SCHEDULE");
    assert_eq!(c1.tasks[0].resources, Some(Resources::new(1000, 50)));
    assert_eq!(
        c1.tasks[0].constraints,
        Some(ConstraintSet::from_ids([0]).unwrap())
    );
    assert_eq!(c1.tasks[1].constraints, Some(ConstraintSet::EMPTY));
    let c4 = &jobs[1];
    assert_eq!(
        (c4.arrival, c4.tasks[0].duration),
        (Micros(9500), Micros(2400))
    );
    assert_eq!(
        c4.tasks[0].resources,
        Some(Resources::new(4000, 250)),
        "UPDATE_RUNNING"
    );
    let c6 = &jobs[2];
    assert_eq!(c6.tasks[0].resources, None);
    assert_eq!(
        c6.tasks[0].constraints,
        Some(ConstraintSet::from_ids([3]).unwrap())
    );
    let c2 = &jobs[3];
    assert_eq!(
        (c2.arrival, c2.tasks[0].duration),
        (Micros(2600), Micros(12000))
    );
    assert_eq!(
        c2.tasks[0].constraints,
        Some(ConstraintSet::from_ids([2]).unwrap())
    );

    let dropped = [
        ("task: no FINISH (FAIL)", 1),
        ("task: no FINISH (KILL)", 1),
        ("task: no FINISH (LOST)", 1),
        ("task: no FINISH at end of input", 2),
        ("task: FINISH without SCHEDULE", 1),
        ("task: no SUBMIT", 1),
        ("event for a job already flushed", 1),
        ("job with no finished task", 3),
        ("time: empty", 1),
        ("time: after the trace end", 1),
        ("type: unknown event type", 1),
    ];
    for (reason, n) in dropped {
        assert_eq!(report.dropped_for(reason), n, "{reason}: {report}");
    }
    assert_eq!(report.dropped.len(), dropped.len(), "{report}");
    assert_eq!(
        report.caveat_for("resource_request: outside 0-1 (resources unknown)"),
        1
    );
    assert_eq!(report.limit_for("job arrival out of order"), 1);
    assert_eq!(
        report.mappings,
        vec![
            "constraint 0 = arch EQUAL \"x86\"",
            "constraint 1 = zone PRESENT \"\"",
            "constraint 2 = kernel GREATER_THAN \"5\"",
            "constraint 3 = arch EQUAL \"arm\"",
        ]
    );
}

#[test]
fn google_json_lines_fixture() {
    let (jobs, report) = google(
        "google_instance_events.json",
        GoogleFormat::JsonLines,
        GOOGLE,
    );
    check_google(&jobs, &report);
}

#[test]
fn google_csv_fixture_reads_the_same() {
    let (jobs, report) = google("google_instance_events.csv", GoogleFormat::Csv, GOOGLE);
    check_google(&jobs, &report);
    let (json_jobs, _) = google(
        "google_instance_events.json",
        GoogleFormat::JsonLines,
        GOOGLE,
    );
    assert_eq!(jobs, json_jobs);
}

#[test]
fn google_open_job_cap_is_reported() {
    let cfg = GoogleConfig {
        max_open_jobs: 1,
        ..GOOGLE
    };
    let (jobs, report) = google("google_instance_events.json", GoogleFormat::JsonLines, cfg);
    assert_eq!(jobs.iter().map(|j| j.id).collect::<Vec<_>>(), vec![4, 6]);
    assert_eq!(
        report.limit_for("open-job cap of 1 hit (oldest job flushed early)"),
        3
    );
    assert_eq!(
        report.dropped_for("task: no FINISH when the open-job cap flushed its job"),
        6
    );
}

#[test]
fn google_malformed_records_name_line_and_field() {
    let read = |text: &str, format| {
        first_error(GoogleReader::new(
            text.as_bytes(),
            Path::new("g"),
            format,
            GOOGLE,
        ))
    };
    let json = "{\"time\":1,\"type\":0,\"collection_id\":1,\"instance_index\":0}\n{\"time\":\"x\",\"type\":0}\n";
    assert_eq!(
        read(json, GoogleFormat::JsonLines),
        "g:2: field `time`: \"x\" is not an integer"
    );
    let json = "\n{\"time\":1,\"type\":0,\"collection_id\":1,\"instance_index\":0,\"constraint\":[{\"name\":\"a\",\"relation\":\"ABOUT\"}]}\n";
    let err = read(json, GoogleFormat::JsonLines);
    assert!(
        err.starts_with("g:2: field `constraint[0].relation`"),
        "{err}"
    );
    let err = read("not json\n", GoogleFormat::JsonLines);
    assert!(err.starts_with("g:1: field `record`: not JSON"), "{err}");
    let csv = "time,type,collection_id\n1,0,1\n";
    assert_eq!(
        read(csv, GoogleFormat::Csv),
        "g:1: field `instance_index`: missing from the header line"
    );
    let csv = "time,type,collection_id,instance_index,resource_request.cpus,resource_request.memory\n1,0,1,0,0.1,0.1\n2,0,1,1,lots,0.1\n";
    assert_eq!(
        read(csv, GoogleFormat::Csv),
        "g:3: field `resource_request.cpus`: \"lots\" is not a number"
    );
}

#[test]
fn google_more_than_64_constraints_is_an_error() {
    let mut text = String::new();
    for i in 0..65 {
        text.push_str(&format!(
            "{{\"time\":{i},\"type\":0,\"collection_id\":{i},\"instance_index\":0,\"constraint\":[{{\"name\":\"c{i}\",\"value\":\"1\",\"relation\":0}}]}}\n"
        ));
    }
    let err = first_error(GoogleReader::new(
        text.as_bytes(),
        Path::new("g"),
        GoogleFormat::JsonLines,
        GOOGLE,
    ));
    assert!(
        err.starts_with("g:65: field `constraint`: more than 64 distinct constraints"),
        "{err}"
    );
    assert!(err.contains("c64 EQUAL"), "{err}");
}
