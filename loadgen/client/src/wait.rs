//! `megha wait JOB...` (and `megha run --wait`): polls `GET /v1/jobs/{id}` until
//! every job ended, then exits with their outcome ([`crate::outcome`]). A GM that
//! does not answer (or answers 429/5xx: restarting, a standby taking over) is asked
//! again with a growing, jittered delay ([`service_kit::retry::Backoff`]) for up to
//! `--give-up-after` seconds in a row; an unknown job (or another user's: the GM
//! gives the same 404) ends the wait at once with [`outcome::UNKNOWN_JOB`].

use crate::outcome::{self, Outcome};
use crate::Gm;
use serde_json::{json, Value};
use std::io::Write;
use std::time::{Duration, Instant};

/// How `wait` polls.
#[derive(Clone, Copy, Debug)]
pub struct WaitOptions {
    /// The longest delay between two polls of a job.
    pub interval: Duration,
    /// Give up (exit [`outcome::NOT_ENDED`]) after this long.
    pub timeout: Option<Duration>,
    /// Give up (exit [`outcome::ERROR`]) when the GM did not answer for this long.
    pub give_up_after: Duration,
}

/// One poll of a job.
enum Poll {
    Status(Value),
    /// 404: unknown, or another user's job.
    Unknown(String),
    /// No answer, 429 or 5xx: ask again later.
    Transient(String),
    /// Any other refusal (401, 403, 400...): asking again will not help.
    Refused(String),
}

async fn poll(gm: &Gm, job: u64) -> Poll {
    let path = format!("/v1/jobs/{job}");
    let sent = tokio::time::timeout(
        Duration::from_secs(10),
        gm.send(&reqwest::Method::GET, &path, None),
    )
    .await;
    let answer = match sent {
        Err(_) => return Poll::Transient(format!("GET {path}: no answer in 10 s")),
        Ok(Err(e)) => return Poll::Transient(format!("{e:#}")),
        Ok(Ok(a)) => a,
    };
    let status = answer.status();
    let text = answer.text().await.unwrap_or_default();
    let reason = || format!("GET {path}: {status}: {}", crate::render::reason(&text));
    match status.as_u16() {
        200 => match serde_json::from_str(&text) {
            Ok(v) => Poll::Status(v),
            Err(e) => Poll::Refused(format!("GET {path}: not JSON ({e}): {text}")),
        },
        404 => Poll::Unknown(reason()),
        429 | 500..=599 => Poll::Transient(reason()),
        _ => Poll::Refused(reason()),
    }
}

/// Waits for every job of `jobs`; prints one line per job as it ends (a JSON line
/// with `json`) and returns the exit status: [`outcome::combined`] of the jobs in
/// the order given, or the first error's code.
pub(crate) async fn wait(gm: &Gm, jobs: &[u64], options: WaitOptions, json: bool) -> u8 {
    let started = Instant::now();
    let mut ended: Vec<Option<u8>> = vec![None; jobs.len()];
    let mut backoff =
        service_kit::retry::Backoff::new(Duration::from_millis(200), Duration::from_secs(5));
    let mut unreachable_since: Option<Instant> = None;
    let mut polls = 0u32;
    let out = &mut std::io::stdout();
    loop {
        let mut transient = None;
        for (i, &job) in jobs.iter().enumerate() {
            if ended[i].is_some() {
                continue;
            }
            match poll(gm, job).await {
                Poll::Status(status) => {
                    let Some(o) = Outcome::of(&status) else {
                        eprintln!("megha: job {job}: unknown state in {status}");
                        return outcome::ERROR;
                    };
                    if o != Outcome::Active {
                        let code = o.exit_code();
                        ended[i] = Some(code);
                        let line = if json {
                            json!({"job": job, "outcome": o.describe(), "exit_code": code, "status": status})
                                .to_string()
                        } else {
                            format!("job {job}: {}", o.describe())
                        };
                        let _ = writeln!(out, "{line}");
                        let _ = out.flush();
                    }
                }
                Poll::Unknown(reason) => {
                    eprintln!(
                        "megha: job {job} is unknown (never submitted to this GM, another user's, or ended and forgotten): {reason}"
                    );
                    return outcome::UNKNOWN_JOB;
                }
                Poll::Refused(reason) => {
                    eprintln!("megha: {reason}");
                    return outcome::ERROR;
                }
                Poll::Transient(reason) => {
                    transient = Some(reason);
                    break;
                }
            }
        }
        if ended.iter().all(Option::is_some) {
            return outcome::combined(ended.into_iter().flatten());
        }
        let delay = match transient {
            Some(reason) => {
                let since = *unreachable_since.get_or_insert_with(Instant::now);
                if since.elapsed() >= options.give_up_after {
                    eprintln!(
                        "megha: giving up after {:?} without an answer: {reason}",
                        options.give_up_after
                    );
                    return outcome::ERROR;
                }
                let delay = backoff.next_delay();
                eprintln!(
                    "megha: the GM did not answer ({reason}); asking again in {} ms",
                    delay.as_millis()
                );
                delay
            }
            None => {
                unreachable_since = None;
                backoff.reset();
                polls += 1;
                let max = options.interval.as_millis() as u64;
                Duration::from_millis(outcome::poll_delay_ms(polls - 1, max))
            }
        };
        if let Some(timeout) = options.timeout {
            if started.elapsed() + delay > timeout {
                let open: Vec<String> = jobs
                    .iter()
                    .zip(&ended)
                    .filter(|(_, e)| e.is_none())
                    .map(|(j, _)| j.to_string())
                    .collect();
                eprintln!(
                    "megha: --timeout: not ended yet: job {}",
                    open.join(", job ")
                );
                return outcome::NOT_ENDED;
            }
        }
        tokio::time::sleep(delay).await;
    }
}
