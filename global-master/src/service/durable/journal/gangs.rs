//! The gang specs of the gang jobs in the journal (table `gangs`, issue 37): written
//! in the transaction that accepts the job, removed with it, read back so that a
//! restarted GM resumes a gang that had not started as a gang (docs/gangs.md). A
//! table of its own: journals written before it read as they were (no gang).

use common::gang::GangSpec;
use common::{ClusterName, JobId};
use redb::{ReadTransaction, TableDefinition, WriteTransaction};

/// Job id -> the job's [`GangSpec`] (bincode), for gang jobs only.
const GANGS: TableDefinition<u64, &[u8]> = TableDefinition::new("gangs");

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
    Ok(())
}

/// `job`'s gang spec, if it is a gang (none in a journal written before gangs).
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
    Ok(Some(common::codec::decode_stored(cluster, value.value())?))
}
