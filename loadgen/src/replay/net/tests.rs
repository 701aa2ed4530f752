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
    check_gms_reachable(&client, &[url], Duration::from_millis(300))
        .await
        .expect("a 503 is an answer: the GM is there, only not ready");
}
