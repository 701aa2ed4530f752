//! The gang specs of the gang jobs in the journal (table `gangs`, issue 37): written
//! in the transaction that accepts the job, removed with it, read back so that a
//! restarted GM resumes a gang that had not started as a gang (docs/gangs.md). A
//! table of its own: journals written before it read as they were (no gang).
//!
//! Also that a gang *left* its coordinator (table `gangs_left`: started whole,
//! failed at its timeout, or given up to run one by one; `GmOutput::gangs_started`,
//! `gangs_failed`, `gangs_partial`): such a gang resumes as ordinary tasks, one
//! not recorded as gone resumes as a gang (restarted whole if some of it ran), as
//! the cores and the fault simulator do; and a restart whole's new runs
//! ([`restarted`]). A journal written before `gangs_left` records
//! no gang as gone: one that had started is restarted whole (safe, at the price
//! of its work).

use common::gang::GangSpec;
use common::{ClusterName, JobId, TaskId};
use redb::{ReadTransaction, ReadableTable, TableDefinition, WriteTransaction};

/// Job id -> the job's [`GangSpec`] (bincode), for gang jobs only.
const GANGS: TableDefinition<u64, &[u8]> = TableDefinition::new("gangs");
/// Job id -> 1: the gang left its coordinator (it resumes as ordinary tasks).
const GANGS_LEFT: TableDefinition<u64, u8> = TableDefinition::new("gangs_left");

/// Writes `job`'s encoded gang spec in `txn`.
pub(super) fn write(
    txn: &WriteTransaction,
    job: JobId,
    gang: &[u8],
) -> Result<(), Box<dyn std::error::Error>> {
    txn.open_table(GANGS)?.insert(job.0, gang)?;
    Ok(())
}

/// Forgets `job`'s gang spec (the job left the journal).
pub(super) fn remove(txn: &WriteTransaction, job: JobId) -> Result<(), Box<dyn std::error::Error>> {
    txn.open_table(GANGS)?.remove(job.0)?;
    txn.open_table(GANGS_LEFT)?.remove(job.0)?;
    Ok(())
}

/// `job`'s gang spec, if it is a gang that has not left its coordinator (none in
/// a journal written before gangs).
pub(super) fn read(
    txn: &ReadTransaction,
    cluster: &ClusterName,
    job: u64,
) -> Result<Option<GangSpec>, Box<dyn std::error::Error>> {
    let table = match txn.open_table(GANGS) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let Some(value) = table.get(job)? else {
        return Ok(None);
    };
    let left = match txn.open_table(GANGS_LEFT) {
        Ok(t) => t.get(job)?.is_some(),
        Err(redb::TableError::TableDoesNotExist(_)) => false,
        Err(e) => return Err(e.into()),
    };
    if left {
        return Ok(None);
    }
    Ok(Some(common::codec::decode_stored(cluster, value.value())?))
}

/// Marks the gangs of `jobs` as gone from their coordinator, in `txn`.
pub(super) fn mark_left(
    txn: &WriteTransaction,
    jobs: &[JobId],
) -> Result<(), Box<dyn std::error::Error>> {
    let mut left = txn.open_table(GANGS_LEFT)?;
    for job in jobs {
        left.insert(job.0, 1)?;
    }
    Ok(())
}

/// The journal's runs and ends tables.
pub(super) type RunsAndEnds = (
    TableDefinition<'static, (u64, u32), (u32, u32)>,
    TableDefinition<'static, (u64, u32), &'static [u8]>,
);

/// A gang restarted whole, in `txn`: each member's (task, next run) is written
/// as its run (its failures kept) and its end, if one was written, is void.
/// Returns the members whose end was void (their tasks are open again).
pub(super) fn restarted(
    txn: &WriteTransaction,
    members: &[(TaskId, u32)],
    (runs, ended): RunsAndEnds,
) -> Result<Vec<TaskId>, Box<dyn std::error::Error>> {
    let mut runs = txn.open_table(runs)?;
    let mut ended = txn.open_table(ended)?;
    let mut reopened = Vec::new();
    for (task, next) in members {
        let key = (task.job.0, task.index);
        let failed = runs.get(key)?.map_or(0, |v| v.value().1);
        runs.insert(key, (*next, failed))?;
        if ended.remove(key)?.is_some() {
            reopened.push(*task);
        }
    }
    Ok(reopened)
}
