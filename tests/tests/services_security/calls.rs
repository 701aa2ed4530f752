//! How the tests call: a credential of each kind ([`Cred`]), one call presenting it,
//! and the bodies the phases share.

use common::codec;
use serde_json::Value;
use tests::procs::{credentials, http_raw};

/// What a call presents.
#[derive(Clone, Copy, Debug)]
pub enum Cred<'a> {
    Nothing,
    /// A bearer token nobody holds.
    WrongToken,
    /// A cluster credential that is not the secret.
    WrongSecret,
    /// A user's bearer token.
    User(&'a str),
    /// The cluster secret.
    Secret,
    /// The cluster secret, a user token and `x-megha-forwarded-by`.
    Forwarded(&'a str),
    /// A user token and `x-megha-forwarded-by`, without the cluster secret.
    SpoofedForward(&'a str),
}

pub fn call(method: &str, url: &str, body: &[u8], bincode: bool, cred: Cred) -> (u16, String) {
    let c = credentials();
    let bearer = |t: &str| format!("Bearer {t}");
    let headers: Vec<(&str, String)> = match cred {
        Cred::Nothing => vec![],
        Cred::WrongToken => vec![("Authorization", bearer("not-a-token-of-anyone-1234"))],
        Cred::WrongSecret => vec![("x-megha-cluster-token", "0".repeat(48))],
        Cred::User(t) => vec![("Authorization", bearer(t))],
        Cred::Secret => vec![("x-megha-cluster-token", c.secret.clone())],
        Cred::Forwarded(t) => vec![
            ("Authorization", bearer(t)),
            ("x-megha-cluster-token", c.secret.clone()),
            ("x-megha-forwarded-by", "1".into()),
        ],
        Cred::SpoofedForward(t) => vec![
            ("Authorization", bearer(t)),
            ("x-megha-forwarded-by", "1".into()),
        ],
    };
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let ct = if bincode {
        codec::CONTENT_TYPE
    } else {
        "application/json"
    };
    let (status, _, body) =
        http_raw(method, url, ct, body, &headers).unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A JSON call without a body, presenting `cred`.
pub fn call_as(method: &str, url: &str, cred: Cred) -> (u16, String) {
    call(method, url, b"", false, cred)
}

/// Submits `job` (JSON) to the GM at `gm` as `cred`: its job id (the answer must be 202).
pub fn submit_as(gm: &str, job: &str, cred: Cred) -> u64 {
    let (status, answer) = call(
        "POST",
        &format!("{gm}/v1/jobs"),
        job.as_bytes(),
        false,
        cred,
    );
    assert_eq!(status, 202, "{answer}");
    json(&answer)["job"].as_u64().expect("job id")
}

pub fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

pub fn one_task(job: u64) -> common::TaskSpec {
    tests::task(job, 1, &[])
}

/// A job of one short task in `queue`.
pub fn short(queue: &str) -> String {
    format!(
        r#"{{"tasks":[{{"queue":"{queue}","resources":{{"cpu_millis":100,"memory_mb":1}},"duration_ms":10}}]}}"#
    )
}

/// An LRA of one container in queue `a`.
pub const LRA: &str = r#"{"queue":"a","containers":[{"resources":{"cpu_millis":100,"memory_mb":1},"tags":["t"],"duration_ms":10}]}"#;
