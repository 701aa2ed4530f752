use super::check_gms_reachable;
use std::io::{Read, Write};
use std::time::Duration;

/// A loopback URL nobody listens on (a port bound and released at once).
fn closed_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

#[tokio::test]
async fn a_gm_that_never_answers_is_named_once_the_wait_is_over() {
    let client = reqwest::Client::new();
    let url = closed_url();
    let err = check_gms_reachable(
        &client,
        std::slice::from_ref(&url),
        &megha(),
        Duration::from_millis(300),
    )
    .await
    .expect_err("nobody listens there");
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("--gm {url}: no answer from {url}/healthz within")),
        "{text}"
    );
    assert!(text.contains("is the global master running"), "{text}");
}

#[tokio::test]
async fn any_http_answer_counts_even_an_error_status() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request);
            let _ = stream.write_all(
                b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
        }
    });
    let client = reqwest::Client::new();
    check_gms_reachable(&client, &[url], &megha(), Duration::from_millis(300))
        .await
        .expect("a 503 is an answer: the GM is there, only not ready");
}

fn megha() -> common::ClusterName {
    "megha".parse().expect("name")
}

/// A fake GM answering /healthz as a GM of cluster `name` does (the header).
fn gm_of_cluster(name: &'static str) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let _ = read_request(&mut stream);
            let answer = format!("HTTP/1.1 200 OK\r\nx-megha-cluster: {name}\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}");
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    url
}

#[tokio::test]
async fn a_gm_of_another_cluster_is_named_in_the_first_line() {
    let client = reqwest::Client::new();
    let ours = gm_of_cluster("megha");
    let blue = gm_of_cluster("blue");
    check_gms_reachable(
        &client,
        std::slice::from_ref(&ours),
        &megha(),
        Duration::from_secs(2),
    )
    .await
    .expect("a GM of our cluster");
    let err = check_gms_reachable(
        &client,
        &[ours, blue.clone()],
        &megha(),
        Duration::from_secs(2),
    )
    .await
    .expect_err("a GM of cluster blue");
    let text = err.to_string();
    let first = text.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!(
            "cluster mismatch: --gm {blue} belongs to cluster `blue`, this replay to `megha`"
        )),
        "{text}"
    );
    assert!(first.contains("--cluster-name"), "{text}");
}

/// What a fake GM address does with each request it reads.
#[derive(Clone, Copy)]
enum Fake {
    /// Reads the request and closes the connection without answering.
    Vanish,
    /// 503 with Retry-After (a standby not in charge).
    Standby,
    /// 202 with this job id.
    Accept(u64),
}

/// Reads one HTTP request (headers and a Content-Length body) as text.
fn read_request(stream: &mut std::net::TcpStream) -> String {
    let mut data = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&data).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().to_owned())
                })
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                return text;
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return String::from_utf8_lossy(&data).into_owned(),
            Ok(n) => data.extend_from_slice(&chunk[..n]),
        }
    }
}

/// A fake GM address doing `what`; returns its URL and the Idempotency-Keys it got.
fn fake_gm(what: Fake) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let keys = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = keys.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let request = read_request(&mut stream);
            let key = request.lines().find_map(|l| {
                l.to_ascii_lowercase()
                    .starts_with("idempotency-key:")
                    .then(|| l["idempotency-key:".len()..].trim().to_owned())
            });
            seen.lock().expect("keys").push(key.unwrap_or_default());
            let answer = match what {
                Fake::Vanish => continue,
                Fake::Standby => "HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}".to_owned(),
                Fake::Accept(job) => {
                    let body = format!("{{\"job\":{job},\"tasks\":[]}}");
                    format!("HTTP/1.1 202 Accepted\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len())
                }
            };
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    (url, keys)
}

fn one_task() -> crate::replay::driver::JobSubmission {
    let tasks = vec![global_master::service::admission::api::NewTask {
        queue: common::QueueId(0),
        kind: common::TaskKind::default(),
        resources: common::Resources::cores(1, 1),
        constraints: common::ConstraintSet::default(),
        duration: common::Micros(1000),
        tags: Vec::new(),
        executor: None,
        priority: 0,
    }];
    crate::replay::driver::JobSubmission {
        tasks,
        dag: None,
        gang: None,
    }
}

#[tokio::test]
async fn a_gm_with_a_standby_is_reached_at_whichever_address_serves() {
    let cluster: common::ClusterName = "megha".parse().expect("name");
    let client = reqwest::Client::new();
    // The primary dead, the standby in charge.
    let (standby, _) = fake_gm(Fake::Accept(7));
    let gms = vec![format!("{}|{standby}", closed_url())];
    let submit = super::http_submitter(gms, client.clone(), None, &cluster);
    let job = submit(0, one_task())
        .await
        .expect("accepted at the standby");
    assert_eq!(job, common::JobId(7));
    // The primary serving, the standby not in charge (503): accepted at the primary.
    let (primary, _) = fake_gm(Fake::Accept(8));
    let (waiting, _) = fake_gm(Fake::Standby);
    let submit =
        super::http_submitter(vec![format!("{waiting}|{primary}")], client, None, &cluster);
    assert_eq!(
        submit(0, one_task()).await.expect("accepted"),
        common::JobId(8)
    );
}

#[tokio::test]
async fn a_submission_left_unanswered_is_sent_again_with_the_same_key() {
    let cluster: common::ClusterName = "megha".parse().expect("name");
    // The primary reads the job and dies before answering; the standby answers.
    let (vanishing, first) = fake_gm(Fake::Vanish);
    let (standby, second) = fake_gm(Fake::Accept(9));
    let gms = vec![format!("{vanishing}|{standby}")];
    let submit = super::http_submitter(gms, reqwest::Client::new(), None, &cluster);
    assert_eq!(
        submit(0, one_task()).await.expect("accepted"),
        common::JobId(9)
    );
    let sent_first = first.lock().expect("keys").clone();
    assert_eq!(sent_first.len(), 1, "{sent_first:?}");
    assert!(sent_first[0].starts_with("loadgen-"), "{sent_first:?}");
    assert_eq!(
        *second.lock().expect("keys"),
        sent_first,
        "the same key at the standby"
    );
    // The next job goes to the address that answered last, with a key of its own.
    assert_eq!(
        submit(0, one_task()).await.expect("accepted"),
        common::JobId(9)
    );
    assert_eq!(first.lock().expect("keys").len(), 1);
    let keys = second.lock().expect("keys").clone();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert_ne!(keys[0], keys[1]);
}

/// A job replayed with its DAG reaches the GM as the same DAG: the body's `stages`
/// and each task's `stage` parse back (the GM's own parser) to the DAG it came from.
#[test]
fn a_dag_job_body_parses_back_to_its_dag() {
    use common::dag::{JobDag, OnParentFailure, Stage};
    use global_master::service::admission::api::{parse_job_request, QueueTable};
    let stage = |name: &str, after: &[u16], on| Stage {
        name: name.into(),
        after: after.to_vec(),
        on_parent_failure: on,
    };
    let dag = JobDag {
        stages: vec![
            stage("M1", &[], OnParentFailure::Fail),
            stage("R2_1", &[0], OnParentFailure::Continue),
            stage("J3_1_2", &[0, 1], OnParentFailure::Fail),
        ],
        task_stage: vec![0, 0, 1, 2],
        after_jobs: Vec::new(),
    };
    let mut tasks = one_task().tasks;
    tasks = vec![tasks[0].clone(); 4];
    let body = serde_json::to_vec(&super::job_body(&tasks, Some(&dag), None)).expect("json");
    let queues = QueueTable::new(common::GmId(0), None);
    let job = parse_job_request(&body, 100, &queues).expect("the GM takes it");
    assert_eq!(job.dag.as_deref(), Some(&dag));
    let flat = serde_json::to_vec(&super::job_body(&tasks, None, None)).expect("json");
    assert_eq!(
        parse_job_request(&flat, 100, &queues).expect("flat").dag,
        None
    );
}

/// A gang replayed over HTTP reaches the GM as the same gang: the body's `gang`
/// parses back (the GM's own parser) to the spec it came from.
#[test]
fn a_gang_job_body_parses_back_to_its_gang() {
    use common::gang::{GangSpec, OnTimeout};
    use global_master::service::admission::api::{parse_job_request, QueueTable};
    let tasks = vec![one_task().tasks[0].clone(); 3];
    let queues = QueueTable::new(common::GmId(0), None);
    for gang in [
        GangSpec::all(3, common::Micros::from_millis(2_500)),
        GangSpec {
            min_members: 2,
            timeout: common::Micros::from_secs(90),
            on_timeout: OnTimeout::RunPartial,
        },
    ] {
        let mut body = super::job_body(&tasks, None, None);
        body["gang"] = super::gang_body(&gang);
        let body = serde_json::to_vec(&body).expect("json");
        let job = parse_job_request(&body, 100, &queues).expect("the GM takes it");
        assert_eq!(job.gang, Some(gang));
    }
}
