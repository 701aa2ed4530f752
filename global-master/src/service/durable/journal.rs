//! The GM's journal of accepted work: `202` on a submission means the job is on disk.
//!
//! An embedded, transactional store ([redb](https://docs.rs/redb), one file,
//! `<data-dir>/journal.redb`) rather than a home-made log: every accepted job is
//! written (and fsynced) before the client hears `202`; every task that reaches a
//! final state is written before the LM that reported it hears its answer; a job
//! whose tasks all ended leaves the journal. A GM restarted on the same data dir
//! (killed with -9 at any instant) resubmits every task that had not ended to its
//! core, and shows the ended ones as they ended.
//!
//! Why it does not run a task twice: before resuming, the GM asks every LM which of
//! the open tasks it holds or finished (see `resume`); held ones count as launched
//! (their end arrives over the LM's retried stream), finished ones end; while an LM
//! is silent the others wait, up to the doubt timeout. A resumed task that still
//! runs or finished somewhere is also refused by that LM as a `Duplicate` (the LM
//! remembers what runs and what finished). A task that *failed* while the GM was
//! away runs once more if the end arrives too late (the LM does not keep failures,
//! which may be retried): the resumed run is then that failure's retry, and the
//! failure counts against the job's budget when it arrives.
//!
//! Runs: a failed or lost task that its job's policy runs again gets a new run
//! number (its attempt), written here with the failures so far, in the same
//! transaction as the ends of that step, before the LM hears its answer. A restarted
//! GM resumes a task as a run number after the last one written (and writes it
//! first), never as run 1 again: its LM may remember run 1 lost and kill it, a late
//! end of run 1 would be taken for the resumed run's, and the job's retry budget
//! would start over.
//!
//! Trade-off (see the README): the journal lives on the GM's host (a volume in
//! compose); losing that disk loses the queue, which a broker-backed journal on a
//! clustered RabbitMQ would survive, at the price of a broker round trip per
//! submission and a broker outage blocking submissions.

use crate::service::observe::usage::UsageRow;
use common::dag::JobDag;
use common::{ClusterName, JobId, TaskId, TaskSpec};
use redb::{Database, ReadableTable, ReadableTableMetadata, TableDefinition};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// Job id -> the accepted job ([`JournalJob`], bincode).
const JOBS: TableDefinition<u64, &[u8]> = TableDefinition::new("jobs");
/// (job id, task index) -> how the task ended ([`Ended`], bincode).
const ENDED: TableDefinition<(u64, u32), &[u8]> = TableDefinition::new("ended");
/// (job id, task index) -> (the last run the task may have gone out as, its runs
/// failed so far): the run a retry or a resumed task goes out as is written before
/// it goes out; absent for a task never retried nor resumed (run 1, no failure). A
/// graceful stop writes one less for the tasks it leaves queued, whose run never
/// went out ([`Journal::mark_unsent`]): the next life resumes them as that run
/// (issue 33: resumed tasks reported `attempt: 2` although no run failed).
const RUNS: TableDefinition<(u64, u32), (u32, u32)> = TableDefinition::new("runs");
/// "last_life" -> the life (first batch number) of the last GM process that opened
/// this journal: a later process starts a higher one whatever the clocks say, so
/// the LMs order its requests after its predecessor's (see [`Journal::begin_life`]).
/// Job id -> the job's DAG ([`common::dag::JobDag`], bincode), for DAG jobs only
/// (a table of its own: journals written before DAG jobs read as they were).
const DAGS: TableDefinition<u64, &[u8]> = TableDefinition::new("dags");
/// Job id -> the job's name and labels
/// ([`crate::service::admission::api::JobNames`], bincode), for jobs that have
/// either (a table of its own: journals written before names read as they were).
const NAMES: TableDefinition<u64, &[u8]> = TableDefinition::new("names");
/// Job id -> 1 if it finished, 0 if it failed or was cancelled: how the last
/// [`OUTCOMES_KEPT`] jobs that left the journal ended, for the DAG jobs that run after
/// them (written in the transaction that closes the job, so no restart loses it).
const OUTCOMES: TableDefinition<u64, u8> = TableDefinition::new("outcomes");
/// Job outcomes kept (the oldest jobs are forgotten first).
pub const OUTCOMES_KEPT: u64 = 10_000;
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const LAST_LIFE: &str = "last_life";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct JournalJob {
    accepted: Accepted,
    tasks: Vec<TaskSpec>,
}

#[derive(Debug, thiserror::Error)]
#[error("GM journal {path}: {what}: {detail}")]
pub struct JournalError {
    path: String,
    what: &'static str,
    detail: String,
    /// The file is open in another process (redb's exclusive lock): a standby
    /// waits for it.
    locked: bool,
}

impl JournalError {
    /// The journal is held by another process (a live primary).
    pub fn is_locked(&self) -> bool {
        self.locked
    }
}

/// The life a GM opening a journal whose last life was `last` starts: its start
/// time `proposed`, or just above `last` if the clock says otherwise (a clock set
/// back, or a standby on a host whose clock is behind).
pub fn next_life(proposed: u64, last: Option<u64>) -> u64 {
    match last {
        Some(last) => proposed.max(last.saturating_add(1)),
        None => proposed.max(1),
    }
}

pub struct Journal {
    db: Database,
    path: String,
    /// Per job in the journal: tasks not yet ended (a job leaves when it reaches 0).
    open: BTreeMap<JobId, u32>,
    /// Records are in this cluster's envelope: another cluster's journal is refused.
    cluster: ClusterName,
    /// Accounting rows written with the next task ends (see [`usage`]).
    pending_usage: Vec<UsageRow>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Journal({}, {} jobs)", self.path, self.open.len())
    }
}

impl Journal {
    /// Opens (or creates) the journal in `dir`, and reads back every job in it.
    pub fn open(
        dir: &Path,
        cluster: &ClusterName,
    ) -> Result<(Journal, Vec<Recovered>), JournalError> {
        let file = dir.join("journal.redb");
        let path = file.display().to_string();
        let err = |what: &'static str| {
            let path = path.clone();
            move |e: &dyn std::fmt::Display| JournalError {
                path: path.clone(),
                what,
                detail: e.to_string(),
                locked: false,
            }
        };
        std::fs::create_dir_all(dir).map_err(|e| err("cannot create its directory")(&e))?;
        let db = Database::create(&file).map_err(|e| JournalError {
            locked: matches!(e, redb::DatabaseError::DatabaseAlreadyOpen),
            ..err("cannot open")(&e)
        })?;
        let mut journal = Journal {
            db,
            path: path.clone(),
            open: BTreeMap::new(),
            cluster: cluster.clone(),
            pending_usage: Vec::new(),
        };
        let recovered = journal.read_back().map_err(|e| err("cannot read")(&e))?;
        for r in &recovered {
            journal
                .open
                .insert(r.job, (r.tasks.len() - r.ended.len()) as u32);
        }
        Ok((journal, recovered))
    }

    fn read_back(&self) -> Result<Vec<Recovered>, Box<dyn std::error::Error>> {
        let txn = self.db.begin_read()?;
        let jobs = match txn.open_table(JOBS) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let ended = txn.open_table(ENDED).ok();
        let runs = txn.open_table(RUNS).ok();
        let dags = txn.open_table(DAGS).ok();
        let names = txn.open_table(NAMES).ok();
        let mut out = Vec::new();
        for row in jobs.iter()? {
            let (job, bytes) = row?;
            let stored = decode_job(&self.cluster, bytes.value())?;
            let job = job.value();
            let mut done = BTreeMap::new();
            if let Some(ended) = &ended {
                for row in ended.range((job, 0)..=(job, u32::MAX))? {
                    let (key, bytes) = row?;
                    done.insert(
                        key.value().1,
                        common::codec::decode_stored(&self.cluster, bytes.value())?,
                    );
                }
            }
            let mut next = BTreeMap::new();
            if let Some(runs) = &runs {
                for row in runs.range((job, 0)..=(job, u32::MAX))? {
                    let (key, run) = row?;
                    next.insert(key.value().1, run.value());
                }
            }
            let dag = match &dags {
                Some(dags) => match dags.get(job)? {
                    Some(bytes) => Some(Arc::new(common::codec::decode_stored::<JobDag>(
                        &self.cluster,
                        bytes.value(),
                    )?)),
                    None => None,
                },
                None => None,
            };
            let names = match &names {
                Some(names) => match names.get(job)? {
                    Some(bytes) => common::codec::decode_stored(&self.cluster, bytes.value())?,
                    None => Default::default(),
                },
                None => Default::default(),
            };
            let gang = gangs::read(&txn, &self.cluster, job)?;
            out.push(Recovered {
                gang,
                job: JobId(job),
                dag,
                names,
                accepted: stored.accepted,
                tasks: stored.tasks,
                ended: done,
                runs: next,
            });
        }
        Ok(out)
    }

    fn error(&self, what: &'static str, e: impl std::fmt::Display) -> JournalError {
        JournalError {
            path: self.path.clone(),
            what,
            detail: e.to_string(),
            locked: false,
        }
    }

    /// The life of the last process that opened this journal, if one wrote it.
    pub fn last_life(&self) -> Result<Option<u64>, JournalError> {
        let read = || -> Result<Option<u64>, Box<dyn std::error::Error>> {
            let txn = self.db.begin_read()?;
            let meta = match txn.open_table(META) {
                Ok(t) => t,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
                Err(e) => return Err(e.into()),
            };
            Ok(meta.get(LAST_LIFE)?.map(|v| v.value()))
        };
        read().map_err(|e| self.error("cannot read the last life", e))
    }

    /// Starts this process's life: `proposed` (its start time, µs) unless the
    /// journal's last life is not below it, then just above that one
    /// ([`next_life`]); written durably before the life sends anything, so that the
    /// next process (a standby taking over) starts above it without trusting clocks.
    pub fn begin_life(&mut self, proposed: u64) -> Result<u64, JournalError> {
        let life = next_life(proposed, self.last_life()?);
        let write = || -> Result<(), Box<dyn std::error::Error>> {
            let txn = self.db.begin_write()?;
            txn.open_table(META)?.insert(LAST_LIFE, life)?;
            txn.commit()?;
            Ok(())
        };
        write().map_err(|e| self.error("cannot write the life", e))?;
        Ok(life)
    }

    /// Writes an accepted job, durably, before it is acknowledged.
    pub fn accept(
        &mut self,
        job: JobId,
        accepted: &Accepted,
        tasks: &[TaskSpec],
    ) -> Result<(), JournalError> {
        self.accept_job(job, accepted, tasks, JobParts::default())
    }

    /// Writes an accepted job and its optional parts in one transaction (fsynced
    /// before the client hears `202`).
    pub fn accept_job(
        &mut self,
        job: JobId,
        accepted: &Accepted,
        tasks: &[TaskSpec],
        parts: JobParts<'_>,
    ) -> Result<(), JournalError> {
        let JobParts {
            dag,
            names,
            spec,
            gang,
        } = parts;
        let gang = gang
            .map(|g| common::codec::encode(&self.cluster, g))
            .transpose()
            .map_err(|e| self.error("cannot encode", e))?;
        let names = names
            .map(|n| common::codec::encode(&self.cluster, n))
            .transpose()
            .map_err(|e| self.error("cannot encode", e))?;
        // The spec with its user: who may read it once the job left the journal.
        let spec = spec
            .map(|packed| {
                let stored = StoredSpec {
                    user: accepted.user.clone(),
                    packed: packed.to_vec(),
                };
                common::codec::encode(&self.cluster, &stored)
            })
            .transpose()
            .map_err(|e| self.error("cannot encode", e))?;
        let stored = JournalJob {
            accepted: accepted.clone(),
            tasks: tasks.to_vec(),
        };
        let bytes = common::codec::encode(&self.cluster, &stored)
            .map_err(|e| self.error("cannot encode", e))?;
        let dag = dag
            .map(|d| common::codec::encode(&self.cluster, d))
            .transpose()
            .map_err(|e| self.error("cannot encode", e))?;
        let write = || -> Result<(), Box<dyn std::error::Error>> {
            let txn = self.db.begin_write()?;
            txn.open_table(JOBS)?.insert(job.0, bytes.as_slice())?;
            if let Some(dag) = &dag {
                txn.open_table(DAGS)?.insert(job.0, dag.as_slice())?;
            }
            if let Some(names) = &names {
                txn.open_table(NAMES)?.insert(job.0, names.as_slice())?;
            }
            if let Some(spec) = &spec {
                specs::write(&txn, job, spec)?;
            }
            if let Some(gang) = &gang {
                gangs::write(&txn, job, gang)?;
            }
            txn.commit()?;
            Ok(())
        };
        write().map_err(|e| self.error("cannot write an accepted job", e))?;
        self.open.insert(job, tasks.len() as u32);
        Ok(())
    }

    /// Writes, durably and in one transaction, the final states of tasks, the
    /// runs that retried or resumed tasks go out as next (`retries`: task, run, runs
    /// failed so far) and the accounting rows added since ([`Journal::add_usage`]);
    /// a job whose
    /// tasks all ended leaves the journal in the same transaction. Tasks of jobs not
    /// in the journal (or a repeated end) are skipped.
    pub fn ended(
        &mut self,
        ends: &[(TaskId, Ended)],
        retries: &[(TaskId, u32, u32)],
    ) -> Result<(), JournalError> {
        let ends: Vec<_> = ends
            .iter()
            .filter(|(t, _)| self.open.contains_key(&t.job))
            .collect();
        let retries: Vec<_> = retries
            .iter()
            .filter(|(t, _, _)| self.open.contains_key(&t.job))
            .collect();
        if ends.is_empty() && retries.is_empty() && self.pending_usage.is_empty() {
            return Ok(());
        }
        let usage_rows = std::mem::take(&mut self.pending_usage);
        let now_s = service_kit::clock::now().0 / 1_000_000;
        let mut encoded = Vec::with_capacity(ends.len());
        for (task, end) in &ends {
            let bytes = common::codec::encode(&self.cluster, end)
                .map_err(|e| self.error("cannot encode", e))?;
            encoded.push((*task, bytes));
        }
        let open = &mut self.open;
        let db = &self.db;
        let cluster = &self.cluster;
        let mut write = || -> Result<Vec<JobId>, Box<dyn std::error::Error>> {
            let txn = db.begin_write()?;
            let mut closed = Vec::new();
            {
                let mut table = txn.open_table(ENDED)?;
                let mut jobs = txn.open_table(JOBS)?;
                let mut runs = txn.open_table(RUNS)?;
                let mut dags = txn.open_table(DAGS)?;
                let mut names = txn.open_table(NAMES)?;
                let mut outcomes = txn.open_table(OUTCOMES)?;
                for (task, run, failed) in &retries {
                    runs.insert((task.job.0, task.index), (*run, *failed))?;
                }
                let mut left: BTreeMap<JobId, u32> = BTreeMap::new();
                for (task, bytes) in &encoded {
                    let key = (task.job.0, task.index);
                    if table.insert(key, bytes.as_slice())?.is_none() {
                        let n = left
                            .entry(task.job)
                            .or_insert_with(|| open.get(&task.job).copied().unwrap_or(0));
                        *n = n.saturating_sub(1);
                    }
                }
                for (job, n) in left {
                    if n == 0 {
                        jobs.remove(job.0)?;
                        dags.remove(job.0)?;
                        names.remove(job.0)?;
                        gangs::remove(&txn, job)?;
                        let mut ok = true;
                        for row in table.range((job.0, 0)..=(job.0, u32::MAX))? {
                            let (_, bytes) = row?;
                            let ended: Ended =
                                common::codec::decode_stored(cluster, bytes.value())?;
                            ok &= ended.failure.is_none() && !ended.cancelled;
                        }
                        outcomes.insert(job.0, u8::from(ok))?;
                        table.retain_in((job.0, 0)..=(job.0, u32::MAX), |_, _| false)?;
                        runs.retain_in((job.0, 0)..=(job.0, u32::MAX), |_, _| false)?;
                        closed.push(job);
                    } else {
                        open.insert(job, n);
                    }
                }
                while outcomes.len()? > OUTCOMES_KEPT {
                    outcomes.pop_first()?;
                }
            }
            usage::write(&txn, &usage_rows, now_s)?;
            txn.commit()?;
            Ok(closed)
        };
        let closed = write().map_err(|e| JournalError {
            path: self.path.clone(),
            what: "cannot write task ends",
            detail: e.to_string(),
            locked: false,
        })?;
        for job in closed {
            self.open.remove(&job);
        }
        Ok(())
    }

    /// Writes, durably, that the gangs of `jobs` left their coordinator
    /// ([`gangs::mark_left`]); jobs not in the journal are skipped.
    pub fn gangs_left(&mut self, jobs: &[JobId]) -> Result<(), JournalError> {
        let jobs: Vec<JobId> = (jobs.iter().copied())
            .filter(|j| self.open.contains_key(j))
            .collect();
        // Called at every step: no write transaction (an fsync) when no gang left.
        if jobs.is_empty() {
            return Ok(());
        }
        let write = || -> Result<(), Box<dyn std::error::Error>> {
            let txn = self.db.begin_write()?;
            gangs::mark_left(&txn, &jobs)?;
            Ok(txn.commit()?)
        };
        write().map_err(|e| self.error("cannot write that gangs left", e))
    }

    /// A gang restarted whole: its members' next runs, their ends void
    /// ([`gangs::restarted`]). Durable, before the new runs go out.
    pub fn gang_restarted(&mut self, members: &[(TaskId, u32)]) -> Result<(), JournalError> {
        let members: Vec<_> = (members.iter().copied())
            .filter(|(t, _)| self.open.contains_key(&t.job))
            .collect();
        let write = || -> Result<Vec<TaskId>, Box<dyn std::error::Error>> {
            let txn = self.db.begin_write()?;
            let reopened = gangs::restarted(&txn, &members, (RUNS, ENDED))?;
            txn.commit()?;
            Ok(reopened)
        };
        let reopened = write().map_err(|e| self.error("cannot write a gang's restart", e))?;
        for task in reopened {
            *self.open.entry(task.job).or_insert(0) += 1;
        }
        Ok(())
    }

    /// The packed spec of `job` and its user, if the journal keeps it.
    pub fn spec(&self, job: JobId) -> Result<Option<StoredSpec>, JournalError> {
        specs::read(&self.db, &self.cluster, job).map_err(|e| self.error("cannot read a spec", e))
    }

    /// How each of `jobs` ended, for those that left the journal (see
    /// [`OUTCOMES`]): (job, finished).
    pub fn outcomes(&self, jobs: &[JobId]) -> Result<Vec<(JobId, bool)>, JournalError> {
        let read = || -> Result<Vec<(JobId, bool)>, Box<dyn std::error::Error>> {
            let txn = self.db.begin_read()?;
            let table = match txn.open_table(OUTCOMES) {
                Ok(t) => t,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
                Err(e) => return Err(e.into()),
            };
            let mut out = Vec::new();
            for job in jobs {
                if let Some(ok) = table.get(job.0)? {
                    out.push((*job, ok.value() == 1));
                }
            }
            Ok(out)
        };
        read().map_err(|e| self.error("cannot read job outcomes", e))
    }

    /// A graceful stop leaves `tasks` queued, their current run never sent (the GM
    /// sends nothing more): each one's recorded run goes down by one, so that the
    /// next life resumes it as the run it was to go out as, not the one after.
    /// Durable, one transaction; tasks of jobs not in the journal are skipped.
    /// Returns how many were marked.
    pub fn mark_unsent(&mut self, tasks: &[TaskId]) -> Result<usize, JournalError> {
        let tasks: Vec<_> = tasks
            .iter()
            .filter(|t| self.open.contains_key(&t.job))
            .collect();
        if tasks.is_empty() {
            return Ok(0);
        }
        let db = &self.db;
        let write = || -> Result<usize, Box<dyn std::error::Error>> {
            let txn = db.begin_write()?;
            let mut marked = 0;
            {
                let mut runs = txn.open_table(RUNS)?;
                for task in &tasks {
                    let key = (task.job.0, task.index);
                    let (run, failed) = runs.get(key)?.map_or((1, 0), |v| v.value());
                    if run >= 1 {
                        runs.insert(key, (run - 1, failed))?;
                        marked += 1;
                    }
                }
            }
            txn.commit()?;
            Ok(marked)
        };
        write().map_err(|e| self.error("cannot mark unsent runs", e))
    }

    /// Accounting rows to write with the next task ends (or alone, by
    /// [`Journal::ended`]); see [`usage`].
    pub fn add_usage(&mut self, rows: impl IntoIterator<Item = UsageRow>) {
        self.pending_usage.extend(rows);
    }

    /// Every accounting row kept, oldest hour first.
    pub fn usage_rows(&self) -> Result<Vec<UsageRow>, JournalError> {
        usage::read(&self.db).map_err(|e| self.error("cannot read the usage", e))
    }

    /// Jobs in the journal (not every task ended).
    pub fn jobs(&self) -> usize {
        self.open.len()
    }

    /// True while `job` is in the journal (accepted here, not every task ended):
    /// its open tasks are resumed by the GM's next life.
    pub fn holds(&self, job: JobId) -> bool {
        self.open.contains_key(&job)
    }
}

mod gangs;
mod records;
pub use records::{Accepted, Ended, Recovered};
mod legacy;
mod parts;
mod specs;
mod usage;

/// A journaled job, of this version or of one whose tasks had another shape
/// ([`legacy`]).
fn decode_job(
    cluster: &ClusterName,
    bytes: &[u8],
) -> Result<JournalJob, common::codec::CodecError> {
    if bytes
        .first()
        .is_some_and(|v| legacy::TASKS_WITHOUT_PRIORITY.contains(v))
    {
        let old: legacy::OldJob<Accepted> = common::codec::decode_stored(cluster, bytes)?;
        return Ok(JournalJob {
            accepted: old.accepted,
            tasks: old.tasks.into_iter().map(TaskSpec::from).collect(),
        });
    }
    common::codec::decode_stored(cluster, bytes)
}

pub use parts::JobParts;
pub use specs::StoredSpec;

#[cfg(test)]
mod tests;
