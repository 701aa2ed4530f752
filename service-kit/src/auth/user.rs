//! The client side of a user's API token: read it ([`user_token`]) and send it on
//! every call to the GM API ([`user_client`]).

use anyhow::{bail, Context as _, Result};
use axum::http::HeaderValue;
use std::path::Path;

/// Environment variable holding a user's API token (the GM's `--tokens-file` maps it
/// to a user); `--token-file` / `MEGHA_TOKEN_FILE` name a file holding it instead.
pub const TOKEN_ENV: &str = "MEGHA_TOKEN";

/// A user's API token: from `file` if given, else `MEGHA_TOKEN`, else none.
pub fn user_token(file: Option<&Path>) -> Result<Option<String>> {
    let token = match file {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| format!("--token-file {}", path.display()))?,
        None => match std::env::var(TOKEN_ENV) {
            Ok(t) => t,
            Err(_) => return Ok(None),
        },
    };
    let token = token.trim().to_owned();
    if token.is_empty() || HeaderValue::from_str(&format!("Bearer {token}")).is_err() {
        bail!("the API token (--token-file or {TOKEN_ENV}) is empty or not printable ASCII");
    }
    Ok(Some(token))
}

/// An HTTP client for the GM API whose every request carries `token` as a bearer
/// token (marked sensitive); `timeout` bounds each request (`None`: no bound).
pub fn user_client(timeout: Option<std::time::Duration>, token: Option<&str>) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(t) = token {
        if let Ok(mut v) = HeaderValue::from_str(&format!("Bearer {t}")) {
            v.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, v);
        }
    }
    let mut b = crate::tls::client_builder().default_headers(headers);
    if let Some(t) = timeout {
        b = b.timeout(t);
    }
    b.connect_timeout(std::time::Duration::from_secs(2))
        .pool_idle_timeout(std::time::Duration::from_secs(90))
        .tcp_nodelay(true)
        .build()
        .unwrap_or_default()
}
