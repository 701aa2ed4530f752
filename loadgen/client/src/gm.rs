//! The `megha` client's link to its GM: the GM's addresses (a GM and its standby),
//! each call tried on them in turn, JSON answers and refusals in words.

use crate::{flags, render};
use anyhow::{bail, Context, Result};
use serde_json::Value;

/// The GM's addresses (`--gm URL|URL...`: a GM and its standby): calls go to the
/// first that serves.
pub(crate) struct Gm {
    bases: Vec<String>,
    client: reqwest::Client,
}

impl Gm {
    pub(crate) fn new(gm: &str, client: reqwest::Client) -> Gm {
        let mut bases = service_kit::links::alternatives(gm);
        if bases.is_empty() {
            bases.push(gm.to_owned());
        }
        Gm { bases, client }
    }

    /// Sends a request to each address in turn until one serves: an address that is
    /// unreachable (nothing was delivered) or answers 503 (a standby not in charge, a
    /// GM going away: nothing was done) is left for the next; the last one's answer
    /// or error is returned.
    pub(crate) async fn send(
        &self,
        method: &reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<reqwest::Response> {
        let last = self.bases.len() - 1;
        for (i, base) in self.bases.iter().enumerate() {
            let url = format!("{}{path}", base.trim_end_matches('/'));
            let mut request = self.client.request(method.clone(), &url);
            if let Some(body) = body {
                request = request.json(body);
            }
            match request.send().await {
                Ok(answer) if answer.status().as_u16() == 503 && i < last => continue,
                Ok(answer) => return Ok(answer),
                Err(e) if e.is_connect() && i < last => continue,
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!("{method} {url}: no answer (is the GM running at {base}?)")
                    })
                }
            }
        }
        unreachable!("a GM has at least one address")
    }

    /// A JSON call; a non-2xx answer is an error quoting the GM's reason.
    pub(crate) async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value> {
        let answer = self.send(&method, path, body).await?;
        let url = answer.url().to_string();
        let status = answer.status();
        let text = answer.text().await.context("reading the answer")?;
        if !status.is_success() {
            bail!("{method} {url}: {status}: {}", render::reason(&text));
        }
        serde_json::from_str(&text).with_context(|| format!("{url}: not JSON: {text}"))
    }

    pub(crate) async fn get(&self, path: &str) -> Result<Value> {
        self.call(reqwest::Method::GET, path, None).await
    }

    /// `POST /v1/jobs` with `body`, read from the job file `source` if any: a
    /// refusal naming a field of a TOML file says the file's line of that field.
    pub(crate) async fn submit(
        &self,
        body: &Value,
        source: Option<&std::path::Path>,
    ) -> Result<Value> {
        let method = reqwest::Method::POST;
        let answer = self.send(&method, "/v1/jobs", Some(body)).await?;
        let url = answer.url().to_string();
        let status = answer.status();
        let text = answer.text().await.context("reading the answer")?;
        if status.is_success() {
            return serde_json::from_str(&text).with_context(|| format!("{url}: not JSON: {text}"));
        }
        let line = source
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .and_then(|p| {
                let field = serde_json::from_str::<Value>(&text).ok()?["field"]
                    .as_str()?
                    .to_owned();
                let line = flags::toml_line(&std::fs::read_to_string(p).ok()?, &field)?;
                Some(format!(" (at {}:{line})", p.display()))
            })
            .unwrap_or_default();
        bail!("{method} {url}: {status}: {}{line}", render::reason(&text))
    }
}
