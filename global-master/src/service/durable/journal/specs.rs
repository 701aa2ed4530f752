//! The jobs' specs in the journal (table `specs`), written in the transaction that
//! accepts each job and kept after it ends, for the last
//! [`crate::service::durable::specs::SPECS_KEPT`] jobs (see
//! [`crate::service::durable::specs`]).

use common::{ClusterName, JobId};
use redb::{Database, ReadableTableMetadata, TableDefinition, WriteTransaction};
use serde::{Deserialize, Serialize};

/// Job id -> the job's spec as submitted, packed
/// ([`crate::service::durable::specs`]), for the last
/// [`crate::service::durable::specs::SPECS_KEPT`] jobs: kept after the job ends (for
/// `megha resubmit`), pruned oldest first.
const SPECS: TableDefinition<u64, &[u8]> = TableDefinition::new("specs");

/// A job's spec in the journal: packed ([`crate::service::durable::specs`]), with
/// the job's user (who may read it after the job left the journal).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredSpec {
    pub user: Option<String>,
    pub packed: Vec<u8>,
}

/// Writes `job`'s encoded [`StoredSpec`] in `txn`; the oldest beyond the bound go.
pub(super) fn write(
    txn: &WriteTransaction,
    job: JobId,
    spec: &[u8],
) -> Result<(), Box<dyn std::error::Error>> {
    let mut specs = txn.open_table(SPECS)?;
    specs.insert(job.0, spec)?;
    while specs.len()? > crate::service::durable::specs::SPECS_KEPT {
        specs.pop_first()?;
    }
    Ok(())
}

/// `job`'s spec, if the journal keeps it.
pub(super) fn read(
    db: &Database,
    cluster: &ClusterName,
    job: JobId,
) -> Result<Option<StoredSpec>, Box<dyn std::error::Error>> {
    let txn = db.begin_read()?;
    let table = match txn.open_table(SPECS) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let Some(value) = table.get(job.0)? else {
        return Ok(None);
    };
    Ok(Some(common::codec::decode_stored(cluster, value.value())?))
}
