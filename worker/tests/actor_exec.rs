//! The worker actor with real executors, over its HTTP API: start orders run
//! commands, their outcomes reach the LM's report link, kills stop them, logs are
//! served, metrics count starts and ends.

mod support;

use common::messages::{KillTask, StartTask, TaskFailure, WorkerReport};
use common::protocol::LmToWorker;
use common::{ExecCommand, Executor, Micros, NodeId, Resources, TaskId, TaskSpec};
use std::sync::Arc;
use std::time::Duration;
use worker::service::actor::metrics::RenderMetrics;
use worker::service::actor::FromLm;

fn exec_task(job: u64, script: &str) -> StartTask {
    StartTask {
        node: NodeId(0),
        dispatch: Default::default(),
        task: TaskSpec::short(
            TaskId::new(job, 0),
            Resources::cores(1, 256),
            Micros::from_secs(1),
        )
        .with_executor(Executor::Exec(Arc::new(ExecCommand {
            program: "sh".into(),
            args: vec!["-c".into(), script.into()],
            ..Default::default()
        }))),
    }
}

/// The next report about `task`, skipping others.
async fn next_about(rx: &mut support::Reports, task: TaskId) -> WorkerReport {
    loop {
        let r = next(rx).await;
        if r.task() == task {
            return r;
        }
    }
}

async fn next(rx: &mut support::Reports) -> WorkerReport {
    tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("a report within 30 s")
        .expect("report link open")
        .1
}

#[actix_rt::test]
async fn outcomes_reach_the_lm_and_logs_are_served() {
    let data_dir = std::env::temp_dir().join(format!("megha-actor-test-{}", std::process::id()));
    let (worker, mut rx) = support::one_node_worker(&data_dir, false).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let app = worker::service::http::router(
        worker.clone(),
        service_kit::auth::ClusterGuard::new(None, "worker"),
        service_kit::cluster::Cluster::new(Default::default(), "worker"),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });

    // A failing command: Started, then Failed with its exit code.
    let failing = exec_task(1, "echo hello; exit 3");
    worker
        .send(FromLm(vec![LmToWorker::Start(failing)]))
        .await
        .expect("start");
    let id = TaskId::new(1, 0);
    assert!(matches!(
        next_about(&mut rx, id).await,
        WorkerReport::Started { .. }
    ));
    let r = next_about(&mut rx, id).await;
    assert!(
        matches!(
            &r,
            WorkerReport::Failed {
                failure: TaskFailure::Exit { code: 3 },
                ..
            }
        ),
        "{r:?}"
    );

    // Its log, and the refusals.
    let client = reqwest::Client::new();
    let get = |path: String| {
        let client = client.clone();
        let url = format!("{url}{path}");
        async move {
            let resp = client.get(url).send().await.expect("GET");
            (resp.status().as_u16(), resp.text().await.expect("body"))
        }
    };
    assert_eq!(
        get("/v1/tasks/1/0/logs".into()).await,
        (200, "hello\n".into())
    );
    assert_eq!(
        get("/v1/tasks/1/0/logs?stream=stderr&tail=5".into()).await,
        (200, String::new())
    );
    let (status, body) = get("/v1/tasks/9/9/logs".into()).await;
    assert_eq!(status, 404);
    assert!(body.contains("no logs for task 9.9"), "{body}");
    let (status, body) = get("/v1/tasks/1/0/logs?stream=stdin".into()).await;
    assert_eq!(status, 400);
    assert!(body.contains("stream"), "{body}");

    // A running command killed on the LM's order: Killed, and nothing finishes later.
    let sleeper = exec_task(2, "sleep 1000");
    worker
        .send(FromLm(vec![LmToWorker::Start(sleeper)]))
        .await
        .expect("start");
    let id = TaskId::new(2, 0);
    assert!(matches!(
        next_about(&mut rx, id).await,
        WorkerReport::Started { .. }
    ));
    worker
        .send(FromLm(vec![LmToWorker::Kill(KillTask {
            attempt: 1,
            node: NodeId(0),
            task: id,
        })]))
        .await
        .expect("kill");
    assert!(matches!(
        next_about(&mut rx, id).await,
        WorkerReport::Killed { .. }
    ));
    // A finishing command afterwards proves the actor still runs; the sleeper sent
    // nothing more in between.
    worker
        .send(FromLm(vec![LmToWorker::Start(exec_task(3, "true"))]))
        .await
        .expect("start");
    loop {
        let r = next(&mut rx).await;
        assert_ne!(r.task(), id, "nothing more about the killed task: {r:?}");
        if matches!(r, WorkerReport::Finished { task, .. } if task == TaskId::new(3, 0)) {
            break;
        }
    }
    let metrics = worker.send(RenderMetrics).await.expect("metrics").encode();
    for line in [
        "megha_worker_starts_by_executor_total{executor=\"exec\"} 3",
        "megha_worker_exits_total{outcome=\"failed\"} 1",
        "megha_worker_exits_total{outcome=\"killed\"} 1",
        "megha_worker_exits_total{outcome=\"finished\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
    let _ = std::fs::remove_dir_all(data_dir);
}

/// A start the worker cannot take (more than the node has) is reported as a failed
/// start with the reason, so the LM frees the allocation instead of the task
/// vanishing; a start repeated for a task already here is not.
#[actix_rt::test]
async fn a_refused_start_is_reported_failed_with_the_reason() {
    let data_dir = std::env::temp_dir().join(format!("megha-refused-test-{}", std::process::id()));
    let (worker, mut rx) = support::one_node_worker(&data_dir, false).await;
    let too_big = StartTask {
        node: NodeId(0),
        dispatch: Default::default(),
        task: TaskSpec::short(
            TaskId::new(40, 0),
            Resources::cores(64, 256),
            Micros::from_secs(1),
        ),
    };
    worker
        .send(FromLm(vec![LmToWorker::Start(too_big)]))
        .await
        .expect("start");
    match next_about(&mut rx, TaskId::new(40, 0)).await {
        WorkerReport::Failed {
            failure: TaskFailure::StartFailed { reason },
            ..
        } => assert!(reason.contains("refused"), "{reason}"),
        other => panic!("expected a failed start, got {other:?}"),
    }
    // A synthetic task started twice: one Started, and the repeat reports nothing.
    let ok = StartTask {
        node: NodeId(0),
        dispatch: Default::default(),
        task: TaskSpec::short(
            TaskId::new(41, 0),
            Resources::cores(1, 256),
            Micros::from_secs(30),
        ),
    };
    worker
        .send(FromLm(vec![
            LmToWorker::Start(ok.clone()),
            LmToWorker::Start(ok),
        ]))
        .await
        .expect("start");
    assert!(matches!(
        next_about(&mut rx, TaskId::new(41, 0)).await,
        WorkerReport::Started { .. }
    ));
    let quiet = tokio::time::timeout(Duration::from_millis(300), rx.recv()).await;
    assert!(quiet.is_err(), "nothing more reported: {quiet:?}");
    let _ = std::fs::remove_dir_all(&data_dir);
}
