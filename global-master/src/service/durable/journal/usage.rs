//! The accounting's rows in the journal (table `usage`: (hour, user, queue) ->
//! (runs, wall ms, CPU milli-core ms, memory MiB ms); see
//! [`crate::service::observe::usage`]): written in the transaction of the task ends
//! that charged them (so a restart neither loses nor repeats a charge), read back at
//! start, bounded like the ledger (hours past the retention and the oldest rows
//! past [`MAX_ROWS`] dropped in the same transaction).

use crate::service::observe::usage::{Totals, UsageRow, MAX_ROWS, RETENTION};
use redb::{Database, ReadableTable, ReadableTableMetadata, TableDefinition, WriteTransaction};

/// (hour start in Unix seconds, user, queue).
type Key<'a> = (u64, &'a str, &'a str);
/// (runs, wall ms, CPU milli-core ms, memory MiB ms).
type Sums = (u64, u64, u64, u64);

const USAGE: TableDefinition<Key, Sums> = TableDefinition::new("usage");

/// Every row kept, oldest hour first.
pub(super) fn read(db: &Database) -> Result<Vec<UsageRow>, Box<dyn std::error::Error>> {
    let txn = db.begin_read()?;
    let table = match txn.open_table(USAGE) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let mut out = Vec::new();
    for row in table.iter()? {
        let (key, value) = row?;
        let (hour, user, queue) = key.value();
        out.push((
            (hour, user.to_owned(), queue.to_owned()),
            totals(value.value()),
        ));
    }
    Ok(out)
}

fn totals((runs, wall_ms, cpu_milli_ms, memory_mb_ms): Sums) -> Totals {
    Totals {
        runs,
        wall_ms,
        cpu_milli_ms,
        memory_mb_ms,
    }
}

/// Adds `rows` to the table in `txn`, then drops the hours older than the
/// retention before `now_s` and the oldest rows past [`MAX_ROWS`].
pub(super) fn write(
    txn: &WriteTransaction,
    rows: &[UsageRow],
    now_s: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut table = txn.open_table(USAGE)?;
    for ((hour, user, queue), add) in rows {
        let key = (*hour, user.as_str(), queue.as_str());
        let mut sum = table
            .get(key)?
            .map_or_else(Totals::default, |v| totals(v.value()));
        sum.add(add);
        let value = (sum.runs, sum.wall_ms, sum.cpu_milli_ms, sum.memory_mb_ms);
        table.insert(key, value)?;
    }
    let cutoff = now_s.saturating_sub(RETENTION.as_secs());
    table.retain_in((0, "", "")..(cutoff, "", ""), |_, _| false)?;
    while table.len()? > MAX_ROWS as u64 {
        table.pop_first()?;
    }
    Ok(())
}
