//! The accounting's rows in the journal (table `usage`: (hour, user, queue) ->
//! (runs, wall ms, CPU milli-core ms, memory MiB ms); see
//! [`crate::service::observe::usage`]): written in the transaction of the task ends
//! that charged them (so a restart neither loses nor repeats a charge), read back at
//! start, bounded like the ledger (hours past the retention and the oldest rows
//! past [`MAX_ROWS`] dropped in the same transaction).

use super::{Journal, JournalError};
use crate::service::observe::usage::{Totals, UsageKey, MAX_ROWS, RETENTION};
use redb::{ReadableTable, ReadableTableMetadata, TableDefinition, WriteTransaction};

/// (hour start in Unix seconds, user, queue).
type Key<'a> = (u64, &'a str, &'a str);
/// (runs, wall ms, CPU milli-core ms, memory MiB ms).
type Sums = (u64, u64, u64, u64);

const USAGE: TableDefinition<Key, Sums> = TableDefinition::new("usage");

impl Journal {
    /// Rows to write with the next task ends (or alone, by [`Journal::ended`]).
    pub fn add_usage(&mut self, rows: impl IntoIterator<Item = (UsageKey, Totals)>) {
        self.pending_usage.extend(rows);
    }

    /// Every row kept, oldest hour first.
    pub fn usage_rows(&self) -> Result<Vec<(UsageKey, Totals)>, JournalError> {
        let read = || -> Result<Vec<(UsageKey, Totals)>, Box<dyn std::error::Error>> {
            let txn = self.db.begin_read()?;
            let table = match txn.open_table(USAGE) {
                Ok(t) => t,
                Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
                Err(e) => return Err(e.into()),
            };
            let mut out = Vec::new();
            for row in table.iter()? {
                let (key, value) = row?;
                let (hour, user, queue) = key.value();
                let (runs, wall_ms, cpu_milli_ms, memory_mb_ms) = value.value();
                let totals = Totals {
                    runs,
                    wall_ms,
                    cpu_milli_ms,
                    memory_mb_ms,
                };
                out.push(((hour, user.to_owned(), queue.to_owned()), totals));
            }
            Ok(out)
        };
        read().map_err(|e| self.error("cannot read the usage", e))
    }
}

/// Adds `rows` to the table in `txn`, then drops the hours older than the
/// retention before `now_s` and the oldest rows past [`MAX_ROWS`].
pub(super) fn write(
    txn: &WriteTransaction,
    rows: &[(UsageKey, Totals)],
    now_s: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut table = txn.open_table(USAGE)?;
    for ((hour, user, queue), add) in rows {
        let key = (*hour, user.as_str(), queue.as_str());
        let mut sum = match table.get(key)? {
            Some(v) => {
                let (runs, wall_ms, cpu_milli_ms, memory_mb_ms) = v.value();
                Totals {
                    runs,
                    wall_ms,
                    cpu_milli_ms,
                    memory_mb_ms,
                }
            }
            None => Totals::default(),
        };
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
