//! The accounting's rows in the journal (table `usage`: (hour, user, queue) ->
//! (runs, wall ms, CPU milli-core ms, memory MiB ms), and table `usage_used`: the
//! same key -> (runs measured, CPU µs used, highest peak MiB); see
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

/// (runs measured, CPU µs used, highest peak MiB): a table of its own, so that a
/// journal written before it reads as it was.
type Used = (u64, u64, u64);

const USED: TableDefinition<Key, Used> = TableDefinition::new("usage_used");

/// Every row kept, oldest hour first.
pub(super) fn read(db: &Database) -> Result<Vec<UsageRow>, Box<dyn std::error::Error>> {
    let txn = db.begin_read()?;
    let table = match txn.open_table(USAGE) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    let used = match txn.open_table(USED) {
        Ok(t) => Some(t),
        Err(redb::TableError::TableDoesNotExist(_)) => None,
        Err(e) => return Err(e.into()),
    };
    let mut out = Vec::new();
    for row in table.iter()? {
        let (key, value) = row?;
        let (hour, user, queue) = key.value();
        let measured = match &used {
            Some(t) => t.get((hour, user, queue))?.map(|v| v.value()),
            None => None,
        };
        out.push((
            (hour, user.to_owned(), queue.to_owned()),
            totals(value.value(), measured),
        ));
    }
    Ok(out)
}

fn totals((runs, wall_ms, cpu_milli_ms, memory_mb_ms): Sums, used: Option<Used>) -> Totals {
    let (runs_measured, cpu_used_us, memory_peak_mb) = used.unwrap_or_default();
    Totals {
        runs,
        wall_ms,
        cpu_milli_ms,
        memory_mb_ms,
        runs_measured,
        cpu_used_us,
        memory_peak_mb,
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
    let mut used = txn.open_table(USED)?;
    for ((hour, user, queue), add) in rows {
        let key = (*hour, user.as_str(), queue.as_str());
        let before = used.get(key)?.map(|v| v.value());
        let mut sum = table
            .get(key)?
            .map_or_else(Totals::default, |v| totals(v.value(), before));
        sum.add(add);
        let value = (sum.runs, sum.wall_ms, sum.cpu_milli_ms, sum.memory_mb_ms);
        table.insert(key, value)?;
        let measured = (sum.runs_measured, sum.cpu_used_us, sum.memory_peak_mb);
        used.insert(key, measured)?;
    }
    let cutoff = now_s.saturating_sub(RETENTION.as_secs());
    table.retain_in((0, "", "")..(cutoff, "", ""), |_, _| false)?;
    used.retain_in((0, "", "")..(cutoff, "", ""), |_, _| false)?;
    while table.len()? > MAX_ROWS as u64 {
        if let Some((key, _)) = table.pop_first()? {
            let (hour, user, queue) = key.value();
            used.remove((hour, user, queue))?;
        }
    }
    Ok(())
}
