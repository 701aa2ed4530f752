//! Where Google events come from: a CSV export (header line first) or JSON lines.

use super::event::{self, CsvColumns};
use crate::trace::TraceError;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

/// The input of a [`super::GoogleReader`].
#[derive(Debug)]
pub(super) enum Source<R: Read> {
    Csv {
        csv: csv::Reader<R>,
        record: csv::StringRecord,
        columns: Option<CsvColumns>,
    },
    Json {
        input: BufReader<R>,
        buf: String,
        line: u64,
    },
}

impl<R: Read> Source<R> {
    pub(super) fn csv(input: R) -> Self {
        Source::Csv {
            csv: csv::ReaderBuilder::new()
                .has_headers(false)
                .from_reader(input),
            record: csv::StringRecord::new(),
            columns: None,
        }
    }

    pub(super) fn json_lines(input: R) -> Self {
        Source::Json {
            input: BufReader::new(input),
            buf: String::new(),
            line: 0,
        }
    }

    /// The next record and its line: `Ok(None)` at end of input.
    pub(super) fn next_event(
        &mut self,
        path: &Path,
    ) -> Result<Option<(u64, event::Parsed)>, TraceError> {
        match self {
            Source::Csv {
                csv,
                record,
                columns,
            } => loop {
                let more = csv.read_record(record).map_err(|e| csv_error(path, e))?;
                if !more {
                    return Ok(None);
                }
                let line = record.position().map_or(0, |p| p.line());
                let parsed = match columns {
                    None => {
                        let cols = CsvColumns::from_header(record)
                            .map_err(|(f, r)| parse_err(path, line, &f, r))?;
                        *columns = Some(cols);
                        continue;
                    }
                    Some(cols) => cols.parse(record),
                };
                return parsed
                    .map(|p| Some((line, p)))
                    .map_err(|(f, r)| parse_err(path, line, &f, r));
            },
            Source::Json { input, buf, line } => loop {
                buf.clear();
                *line += 1;
                let n = input.read_line(buf).map_err(|source| TraceError::Io {
                    path: path.to_owned(),
                    source,
                })?;
                if n == 0 {
                    return Ok(None);
                }
                if buf.trim().is_empty() {
                    continue;
                }
                let at = *line;
                return event::from_json(buf.trim())
                    .map(|p| Some((at, p)))
                    .map_err(|(f, r)| parse_err(path, at, &f, r));
            },
        }
    }
}

pub(super) fn parse_err(path: &Path, line: u64, field: &str, reason: String) -> TraceError {
    TraceError::Parse {
        path: path.to_owned(),
        line,
        field: field.to_owned(),
        reason,
    }
}

fn csv_error(path: &Path, err: csv::Error) -> TraceError {
    let line = err.position().map_or(0, |p| p.line());
    match err.into_kind() {
        csv::ErrorKind::Io(source) => TraceError::Io {
            path: path.to_owned(),
            source,
        },
        other => TraceError::Parse {
            path: path.to_owned(),
            line,
            field: "record".to_owned(),
            reason: format!("{other:?}"),
        },
    }
}
