//! A fake peer on loopback for tests that play one side of an internal link (an LM
//! for a real worker, a worker for a real LM): a minimal HTTP/1.1 server, one
//! request per connection, answering each with 200 and the bytes its handler gives.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;

/// One request as the fake peer read it: path, headers (names lower-cased), body.
#[derive(Debug)]
pub struct Request {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    /// The value of header `name` (lower case), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Serves on a free loopback port from a thread; returns the base URL. Every
/// answer is `200` with the codec's content type and the handler's bytes.
pub fn serve(handler: impl Fn(Request) -> Vec<u8> + Send + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
            let mut headers = Vec::new();
            let mut length = 0usize;
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                    break;
                }
                let (name, value) = header.split_once(':').unwrap_or(("", ""));
                let (name, value) = (name.trim().to_ascii_lowercase(), value.trim().to_owned());
                if name == "content-length" {
                    length = value.parse().unwrap_or(0);
                }
                headers.push((name, value));
            }
            let mut body = vec![0u8; length];
            let _ = reader.read_exact(&mut body);
            let answer = handler(Request {
                path,
                headers,
                body,
            });
            let mut stream = stream;
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: {}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                common::codec::CONTENT_TYPE,
                answer.len()
            );
            let _ = stream.write_all(&answer);
        }
    });
    url
}
