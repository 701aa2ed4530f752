//! `megha logs`: a task's output through its GM; following a task that has not
//! started waits for its start.

use super::gm::Gm;
use super::render;
use anyhow::{bail, Context, Result};
use std::io::Write;

/// Which output of which task, and how (`megha logs`' arguments).
#[derive(clap::Args, Debug)]
pub struct Which {
    pub job: u64,
    pub index: u32,
    #[arg(long)]
    pub stderr: bool,
    /// The last N lines only.
    #[arg(long)]
    pub tail: Option<usize>,
    /// Keep printing as the task writes, until it ends.
    #[arg(short, long)]
    pub follow: bool,
    /// An earlier attempt's output (1 for the first run; `megha describe`
    /// lists a retried task's attempts). The current attempt's by default.
    #[arg(long)]
    pub attempt: Option<u32>,
}

/// Writes the output `which` names to `out` as it comes.
pub(crate) async fn print(gm: &Gm, which: &Which, out: &mut dyn Write) -> Result<()> {
    let (job, index, follow) = (which.job, which.index, which.follow);
    let stream = if which.stderr { "stderr" } else { "stdout" };
    let mut path = format!("/v1/tasks/{job}/{index}/logs?stream={stream}&follow={follow}");
    if let Some(n) = which.tail {
        path.push_str(&format!("&tail={n}"));
    }
    if let Some(n) = which.attempt {
        path.push_str(&format!("&attempt={n}"));
    }
    let mut answer = gm.send(&reqwest::Method::GET, &path, None).await?;
    // Following a task that has not started (409): wait for its start.
    let mut said = false;
    while follow && answer.status() == reqwest::StatusCode::CONFLICT {
        if !said {
            eprintln!("megha: task {job}.{index} has not started; waiting for it");
            said = true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        answer = gm.send(&reqwest::Method::GET, &path, None).await?;
    }
    if !answer.status().is_success() {
        let url = answer.url().to_string();
        let status = answer.status();
        let text = answer.text().await.unwrap_or_default();
        bail!("GET {url}: {status}: {}", render::reason(&text));
    }
    while let Some(chunk) = answer.chunk().await.context("reading the log")? {
        out.write_all(&chunk)?;
        out.flush()?;
    }
    Ok(())
}
