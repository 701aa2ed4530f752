//! A minimal HTTP client for the tests (std over plain HTTP, reqwest over TLS), with
//! the admin token and the cluster secret or exactly the headers given.

use super::credentials::credentials;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A minimal HTTP/1.1 client over std (no runtime needed): returns (status, body).
pub fn http(method: &str, url: &str, body: Option<&str>) -> std::io::Result<(u16, String, String)> {
    let body = body.unwrap_or("").as_bytes();
    let (status, head, body) = http_bytes(method, url, "application/json", body)?;
    Ok((status, head, String::from_utf8_lossy(&body).into_owned()))
}

/// [`http`] with a binary body of `content_type` (the internal bincode endpoints).
pub fn http_bytes(
    method: &str,
    url: &str,
    content_type: &str,
    body: &[u8],
) -> std::io::Result<(u16, String, Vec<u8>)> {
    let c = credentials();
    let bearer = format!("Bearer {}", c.admin);
    let headers = [
        ("Authorization", bearer.as_str()),
        ("x-megha-cluster-token", c.secret.as_str()),
    ];
    http_raw(method, url, content_type, body, &headers)
}

/// An HTTP/1.1 call with exactly these extra `headers` (no credential of its own).
pub fn http_raw(
    method: &str,
    url: &str,
    content_type: &str,
    body: &[u8],
    headers: &[(&str, &str)],
) -> std::io::Result<(u16, String, Vec<u8>)> {
    if url.starts_with("https://") {
        return https_raw(method, url, content_type, body, headers);
    }
    let rest = url.strip_prefix("http://").unwrap_or(url);
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let mut stream = TcpStream::connect(host)?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{extra}\r\n",
        body.len()
    )?;
    stream.write_all(body)?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(response.len());
    let head = String::from_utf8_lossy(&response[..split]).into_owned();
    let body = response.get(split + 4..).unwrap_or_default().to_vec();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok((status, head, body))
}

/// [`http_raw`] over TLS (reqwest on a runtime of its own), trusting the CA the test
/// gave `service_kit::tls::trust_ca`. The head is the status line only.
fn https_raw(
    method: &str,
    url: &str,
    content_type: &str,
    body: &[u8],
    headers: &[(&str, &str)],
) -> std::io::Result<(u16, String, Vec<u8>)> {
    let io = |e: &dyn std::fmt::Display| std::io::Error::other(format!("{url}: {e}"));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let client = service_kit::tls::client_builder()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| io(&e))?;
        let method = reqwest::Method::from_bytes(method.as_bytes()).map_err(|e| io(&e))?;
        let mut req = client
            .request(method, url)
            .header("content-type", content_type)
            .body(body.to_vec());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.map_err(|e| io(&e))?;
        let status = resp.status().as_u16();
        let head = format!("HTTP/1.1 {status}");
        let bytes = resp.bytes().await.map_err(|e| io(&e))?;
        Ok((status, head, bytes.to_vec()))
    })
}

/// `POST {gm}/v1/jobs` with one job of `n` copies of `task` (a JSON object);
/// asserts 202 and returns the answer.
pub fn submit_tasks(gm: &str, task: &str, n: usize) -> serde_json::Value {
    let body = format!(r#"{{"tasks":[{}]}}"#, vec![task; n].join(","));
    let (status, _, answer) = http("POST", &format!("{gm}/v1/jobs"), Some(&body)).expect("post");
    assert_eq!(status, 202, "{answer}");
    serde_json::from_str(&answer).expect("json answer")
}

pub fn get_json(url: &str) -> serde_json::Value {
    let (_, _, body) = http("GET", url, None).unwrap_or_else(|e| panic!("GET {url}: {e}"));
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {url}: {e}: {body}"))
}
