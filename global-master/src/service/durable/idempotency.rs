//! `Idempotency-Key` on `POST /v1/jobs`: a client that did not hear the answer to a
//! submission sends it again with the same key and gets the first answer (the same
//! job) instead of a second job.
//!
//! - Keys are per user (the caller's name): two users never see each other's keys.
//! - A key is remembered with the SHA-256 of the request body and the job it created;
//!   the same key with another body is refused (422, field `Idempotency-Key`); the
//!   same key while its first request is still being handled is refused (409, retry).
//! - Only accepted submissions (202) are remembered: a refusal (4xx, 429, 503) may be
//!   retried with the same key.
//! - Bounded: a key is forgotten `ttl` after its job was accepted, and the oldest
//!   keys go first beyond `max_keys` (`--idempotency-ttl-s`, `--idempotency-max-keys`).
//! - With `--data-dir` the keys are written (fsynced) to `<data-dir>/idempotency.redb`
//!   before the answer, and read back at start: they survive a GM restart. The key
//!   is also journaled with its job (one transaction, [`KeyOf`]): a GM killed between
//!   the job's write and the key store's takes the key back from the journal at its
//!   next start ([`Idempotency::restore`]), so a retry never creates a second job.

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use common::{ClusterName, JobId, Micros};
use redb::{Database, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The request header.
pub const HEADER: &str = "idempotency-key";
/// The longest key accepted (bytes).
pub const MAX_KEY_LEN: usize = 255;

/// (user, key) -> [`Remembered`] (bincode in the cluster's envelope).
const KEYS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("idempotency_keys");

/// How long and how many keys are kept.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    pub ttl: Duration,
    pub max_keys: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            ttl: Duration::from_secs(24 * 3600),
            max_keys: 100_000,
        }
    }
}

/// What a key stands for: the body it came with and the job it created.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remembered {
    pub body_sha256: [u8; 32],
    pub job: JobId,
    pub tasks: u32,
    pub accepted_at: Micros,
}

/// What to do with a submission carrying a key.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Unknown key, now reserved: handle the request, then [`Idempotency::remember`]
    /// or [`Idempotency::release`].
    Proceed,
    /// Seen with this body: answer with this job again.
    Replay(Remembered),
    /// Seen with another body.
    Mismatch,
    /// Its first request is still being handled.
    InFlight,
}

type Key = (String, String);

#[derive(Default)]
struct Inner {
    keys: HashMap<Key, Remembered>,
    /// Keys by acceptance time (oldest first), for expiry and the count bound.
    order: BTreeMap<(Micros, u64), Key>,
    seq: u64,
    in_flight: HashSet<Key>,
}

/// The remembered keys of one GM.
pub struct Idempotency {
    limits: Limits,
    inner: Mutex<Inner>,
    store: Option<(Database, ClusterName, String)>,
    /// Reservations dropped unsettled (their handler went away without an answer).
    dropped_unsettled: AtomicU64,
}

impl std::fmt::Debug for Idempotency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Idempotency")
            .field("limits", &self.limits)
            .field("durable", &self.store.is_some())
            .finish()
    }
}

/// A key is 1 to 255 visible ASCII characters (e.g. a UUID).
pub fn check_key(key: &[u8]) -> Result<&str, String> {
    if key.is_empty() || key.len() > MAX_KEY_LEN {
        return Err(format!("must be 1 to {MAX_KEY_LEN} characters"));
    }
    if !key.iter().all(|b| b.is_ascii_graphic()) {
        return Err("must be visible ASCII (e.g. a UUID)".into());
    }
    Ok(std::str::from_utf8(key).unwrap_or_default())
}

pub fn body_sha256(body: &[u8]) -> [u8; 32] {
    Sha256::digest(body).into()
}

impl Idempotency {
    /// Keys kept in memory only (no `--data-dir`).
    pub fn in_memory(limits: Limits) -> Self {
        Idempotency {
            limits,
            inner: Mutex::default(),
            store: None,
            dropped_unsettled: AtomicU64::new(0),
        }
    }

    /// Keys kept in `<dir>/idempotency.redb` too; those still valid at `now` are read
    /// back.
    pub fn open(
        dir: &Path,
        cluster: &ClusterName,
        limits: Limits,
        now: Micros,
    ) -> anyhow::Result<Self> {
        let file = dir.join("idempotency.redb");
        let path = file.display().to_string();
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("{path}: cannot create its directory: {e}"))?;
        let db =
            Database::create(&file).map_err(|e| anyhow::anyhow!("{path}: cannot open: {e}"))?;
        let mut rows = Vec::new();
        {
            let txn = db.begin_read()?;
            match txn.open_table(KEYS) {
                Ok(table) => {
                    for row in table.iter()? {
                        let (k, v) = row?;
                        let (user, key) = k.value();
                        let r: Remembered = common::codec::decode_stored(cluster, v.value())
                            .map_err(|e| anyhow::anyhow!("{path}: {e}"))?;
                        rows.push(((user.to_owned(), key.to_owned()), r));
                    }
                }
                Err(redb::TableError::TableDoesNotExist(_)) => {}
                Err(e) => return Err(anyhow::anyhow!("{path}: cannot read: {e}")),
            }
        }
        let me = Idempotency {
            limits,
            inner: Mutex::default(),
            store: Some((db, cluster.clone(), path)),
            dropped_unsettled: AtomicU64::new(0),
        };
        {
            let mut inner = me.lock();
            for (key, r) in rows {
                inner.insert(key, r);
            }
            let dropped = me.evict(&mut inner, now);
            me.delete(&dropped)?;
        }
        Ok(me)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keys remembered now.
    pub fn len(&self) -> usize {
        self.lock().keys.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reservations dropped without being settled (each released, with a log line).
    pub fn dropped_unsettled(&self) -> u64 {
        self.dropped_unsettled.load(Ordering::Relaxed)
    }

    /// Looks `key` of `user` up (reserving it when unknown).
    pub fn lookup(&self, user: &str, key: &str, body_sha256: [u8; 32], now: Micros) -> Lookup {
        let mut inner = self.lock();
        let dropped = self.evict(&mut inner, now);
        if let Err(e) = self.delete(&dropped) {
            tracing::warn!(error = %e, "cannot delete expired idempotency keys");
        }
        let k = (user.to_owned(), key.to_owned());
        if let Some(r) = inner.keys.get(&k) {
            return if r.body_sha256 == body_sha256 {
                Lookup::Replay(r.clone())
            } else {
                Lookup::Mismatch
            };
        }
        if !inner.in_flight.insert(k) {
            return Lookup::InFlight;
        }
        Lookup::Proceed
    }

    /// The request of a reserved key was not accepted: forget the reservation.
    pub fn release(&self, user: &str, key: &str) {
        self.lock()
            .in_flight
            .remove(&(user.to_owned(), key.to_owned()));
    }

    /// The request of a reserved key created `r`: remember it (durably when there is
    /// a store; an error is logged and the key kept in memory).
    pub fn remember(&self, user: &str, key: &str, r: Remembered) {
        let k = (user.to_owned(), key.to_owned());
        if let Some((db, cluster, path)) = &self.store {
            let write = || -> anyhow::Result<()> {
                let bytes = common::codec::encode(cluster, &r)?;
                let txn = db.begin_write()?;
                txn.open_table(KEYS)?
                    .insert((user, key), bytes.as_slice())?;
                txn.commit()?;
                Ok(())
            };
            if let Err(e) = write() {
                tracing::error!(path, job = r.job.0, error = %e, "cannot write an idempotency key; it lasts until this GM stops");
            }
        }
        let mut inner = self.lock();
        inner.in_flight.remove(&k);
        inner.insert(k, r);
        let newest = r_now(&inner);
        let dropped = self.evict(&mut inner, newest);
        drop(inner);
        if let Err(e) = self.delete(&dropped) {
            tracing::warn!(error = %e, "cannot delete evicted idempotency keys");
        }
    }

    /// Keys of jobs read back from the journal (written with their job): those the
    /// key store lacks (the GM died between the two writes) are remembered again.
    /// Returns how many were missing.
    pub fn restore(&self, keys: impl IntoIterator<Item = (KeyOf, Remembered)>) -> usize {
        let mut missing = 0;
        for (k, r) in keys {
            let known = self
                .lock()
                .keys
                .contains_key(&(k.user.clone(), k.key.clone()));
            if !known {
                missing += 1;
                self.remember(&k.user, &k.key, r);
            }
        }
        missing
    }

    /// Drops expired keys and the oldest beyond the count; returns them.
    fn evict(&self, inner: &mut Inner, now: Micros) -> Vec<Key> {
        let ttl = self.limits.ttl.as_micros() as u64;
        let mut dropped = Vec::new();
        while let Some((&(at, seq), _)) = inner.order.iter().next() {
            let expired = now.0.saturating_sub(at.0) >= ttl;
            if !expired && inner.order.len() <= self.limits.max_keys {
                break;
            }
            if let Some(k) = inner.order.remove(&(at, seq)) {
                inner.keys.remove(&k);
                dropped.push(k);
            }
        }
        dropped
    }

    fn delete(&self, keys: &[Key]) -> anyhow::Result<()> {
        let Some((db, _, _)) = &self.store else {
            return Ok(());
        };
        if keys.is_empty() {
            return Ok(());
        }
        let txn = db.begin_write()?;
        {
            let mut table = txn.open_table(KEYS)?;
            for (user, key) in keys {
                table.remove((user.as_str(), key.as_str()))?;
            }
        }
        txn.commit()?;
        Ok(())
    }
}

/// The newest acceptance time remembered (eviction after an insert needs no clock).
fn r_now(inner: &Inner) -> Micros {
    inner
        .order
        .keys()
        .next_back()
        .map_or(Micros(0), |(at, _)| *at)
}

impl Inner {
    fn insert(&mut self, k: Key, r: Remembered) {
        if let Some(old) = self.keys.insert(k.clone(), r.clone()) {
            self.order
                .retain(|(at, _), key| !(*at == old.accepted_at && *key == k));
        }
        self.seq += 1;
        self.order.insert((r.accepted_at, self.seq), k);
    }
}

/// A submission's key, reserved until the submission is answered: settled with
/// [`Reservation::settle`]; dropped unsettled (its handler went away, e.g. a panic),
/// the key is released with a log line and counted, so a retry can proceed instead
/// of being refused as in flight for good.
pub struct Reservation {
    ids: Arc<Idempotency>,
    user: String,
    key: String,
    body_sha256: [u8; 32],
    settled: bool,
}

impl std::fmt::Debug for Reservation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reservation")
            .field("user", &self.user)
            .field("key", &self.key)
            .field("settled", &self.settled)
            .finish()
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        self.ids.dropped_unsettled.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            user = %self.user,
            key = %self.key,
            "an idempotency key's request went away unanswered; its key is released for a retry"
        );
        self.ids.release(&self.user, &self.key);
    }
}

/// A submission's key as the GM's journal keeps it with the job.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KeyOf {
    pub user: String,
    pub key: String,
    pub body_sha256: [u8; 32],
}

impl Reservation {
    /// The key, to be written with the job it creates.
    pub fn key_of(&self) -> KeyOf {
        KeyOf {
            user: self.user.clone(),
            key: self.key.clone(),
            body_sha256: self.body_sha256,
        }
    }
}

/// The 202 answer of an accepted job (the first time and every replay).
pub fn accepted(job: JobId, tasks: u32, replayed: bool) -> Response {
    let ids: Vec<String> = (0..tasks)
        .map(|index| common::TaskId { job, index }.to_string())
        .collect();
    let answer = crate::service::http::answers::JobAccepted {
        job: job.0,
        tasks: ids,
    };
    let mut resp = (StatusCode::ACCEPTED, Json(answer)).into_response();
    if replayed {
        resp.headers_mut()
            .insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
    }
    resp
}

/// The answer header marking a replayed answer.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";

fn refuse(status: StatusCode, why: String) -> Response {
    let mut resp = (
        status,
        Json(serde_json::json!({ "field": "Idempotency-Key", "error": why })),
    )
        .into_response();
    if status == StatusCode::CONFLICT {
        resp.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            HeaderValue::from_static("1"),
        );
    }
    resp
}

impl Idempotency {
    /// Before a submission of `user` is handled: `Ok(None)` without a key,
    /// `Ok(Some(_))` to handle it (then [`Idempotency::settle`]), `Err(answer)` to
    /// answer at once (a replay, or a refusal naming the header).
    pub fn before_submit(
        self: &Arc<Self>,
        headers: &HeaderMap,
        user: &str,
        body: &[u8],
        now: Micros,
    ) -> Result<Option<Reservation>, Box<Response>> {
        let Some(raw) = headers.get(HEADER) else {
            return Ok(None);
        };
        let key = check_key(raw.as_bytes())
            .map_err(|why| Box::new(refuse(StatusCode::BAD_REQUEST, format!("the key {why}"))))?;
        let sha = body_sha256(body);
        match self.lookup(user, key, sha, now) {
            Lookup::Proceed => Ok(Some(Reservation {
                ids: Arc::clone(self),
                user: user.to_owned(),
                key: key.to_owned(),
                body_sha256: sha,
                settled: false,
            })),
            Lookup::Replay(r) => Err(Box::new(accepted(r.job, r.tasks, true))),
            Lookup::Mismatch => Err(Box::new(refuse(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("key `{key}` was used for another request body; a retry must send the same body, a new job a new key"),
            ))),
            Lookup::InFlight => Err(Box::new(refuse(
                StatusCode::CONFLICT,
                format!("a request with key `{key}` is being handled; retry to get its answer"),
            ))),
        }
    }
}

impl Reservation {
    /// After the submission: remembers the job it created, or frees the key when it
    /// was not accepted.
    pub fn settle(mut self, created: Option<(JobId, u32, Micros)>) {
        self.settled = true;
        match created {
            Some((job, tasks, accepted_at)) => self.ids.remember(
                &self.user,
                &self.key,
                Remembered {
                    body_sha256: self.body_sha256,
                    job,
                    tasks,
                    accepted_at,
                },
            ),
            None => self.ids.release(&self.user, &self.key),
        }
    }
}

#[cfg(test)]
mod tests;
