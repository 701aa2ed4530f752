//! The `.tr` format of the Sparrow, Eagle and Megha simulators: one job per line,
//! `arrival_s n_tasks mean_duration_s d1 ... dn`, whitespace separated. Blank lines
//! and lines starting with `#` are skipped.

use super::{TraceError, TraceJob, TraceTask};
use common::Micros;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

/// A streaming `.tr` reader: one [`TraceJob`] per line, in file order.
#[derive(Debug)]
pub struct TrReader<R> {
    input: R,
    path: PathBuf,
    line_no: u64,
    next_id: u64,
    buf: String,
}

impl TrReader<BufReader<File>> {
    pub fn open(path: &Path) -> Result<Self, TraceError> {
        let file = File::open(path).map_err(|source| TraceError::Io {
            path: path.to_owned(),
            source,
        })?;
        Ok(TrReader::new(BufReader::new(file), path))
    }
}

impl<R: BufRead> TrReader<R> {
    pub fn new(input: R, path: &Path) -> Self {
        TrReader {
            input,
            path: path.to_owned(),
            line_no: 0,
            next_id: 0,
            buf: String::new(),
        }
    }

    fn err(&self, field: &str, reason: impl Into<String>) -> TraceError {
        TraceError::Parse {
            path: self.path.clone(),
            line: self.line_no,
            field: field.to_owned(),
            reason: reason.into(),
        }
    }

    fn parse_line(&self, line: &str) -> Result<TraceJob, TraceError> {
        let mut fields = line.split_whitespace();
        let arrival =
            parse_secs(fields.next(), "arrival_s").map_err(|r| self.err("arrival_s", r))?;
        let n: usize = fields
            .next()
            .ok_or_else(|| self.err("n_tasks", "missing"))?
            .parse()
            .map_err(|_| self.err("n_tasks", "not a non-negative integer"))?;
        if n == 0 {
            return Err(self.err("n_tasks", "a job needs at least one task"));
        }
        parse_secs(fields.next(), "mean_duration_s").map_err(|r| self.err("mean_duration_s", r))?;
        let mut tasks = Vec::with_capacity(n);
        for i in 0..n {
            // The field's name is written out only for an error (not once per task).
            let field = DurationField(i + 1);
            let d =
                parse_secs(fields.next(), field).map_err(|r| self.err(&field.to_string(), r))?;
            tasks.push(TraceTask::with_duration(d));
        }
        if fields.next().is_some() {
            return Err(self.err(
                "d*",
                format!("more than n_tasks = {n} durations on the line"),
            ));
        }
        Ok(TraceJob {
            id: self.next_id,
            arrival,
            queue: None,
            stages: Vec::new(),
            tasks,
        })
    }
}

/// The name of a task's duration field: `d1` for the first.
#[derive(Clone, Copy)]
struct DurationField(usize);

impl std::fmt::Display for DurationField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "d{}", self.0)
    }
}

fn parse_secs(field: Option<&str>, name: impl std::fmt::Display) -> Result<Micros, String> {
    let text = field.ok_or_else(|| format!("missing ({name})"))?;
    let secs: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!(
            "{text:?} must be a finite, non-negative number of seconds"
        ));
    }
    Ok(Micros::from_secs_f64(secs))
}

impl<R: BufRead> Iterator for TrReader<R> {
    type Item = Result<TraceJob, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            self.buf.clear();
            self.line_no += 1;
            match self.input.read_line(&mut self.buf) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(source) => {
                    return Some(Err(TraceError::Io {
                        path: self.path.clone(),
                        source,
                    }))
                }
            }
            let line = self.buf.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let job = self.parse_line(line).map_err(|err| {
                // Only a line that is not `.tr` anyway, so commas never reject a good line.
                if line.contains(',') {
                    TraceError::LooksLikeCsv {
                        path: self.path.clone(),
                        line: self.line_no,
                    }
                } else {
                    err
                }
            });
            if job.is_ok() {
                self.next_id += 1;
            }
            return Some(job);
        }
    }
}

/// Writes jobs in `.tr` format (durations only; resources and constraints are lost).
pub fn write_tr<W: Write>(out: &mut W, job: &TraceJob) -> std::io::Result<()> {
    let n = job.tasks.len();
    let mean = if n == 0 {
        0.0
    } else {
        job.tasks
            .iter()
            .map(|t| t.duration.as_secs_f64())
            .sum::<f64>()
            / n as f64
    };
    write!(out, "{:.6} {} {:.6}", job.arrival.as_secs_f64(), n, mean)?;
    for t in &job.tasks {
        write!(out, " {:.6}", t.duration.as_secs_f64())?;
    }
    writeln!(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests may unwrap
mod tests {
    use super::*;

    fn read(text: &str) -> Vec<Result<TraceJob, TraceError>> {
        TrReader::new(text.as_bytes(), Path::new("t.tr")).collect()
    }

    #[test]
    fn reads_jobs_and_durations() {
        let jobs = read("0.5 2 1.5 1 2\n\n# comment\n3 1 4 4\n");
        assert_eq!(jobs.len(), 2);
        let j0 = jobs[0].as_ref().unwrap();
        assert_eq!(j0.arrival, Micros(500_000));
        assert_eq!(j0.tasks.len(), 2);
        assert_eq!(j0.tasks[1].duration, Micros(2_000_000));
        assert_eq!(jobs[1].as_ref().unwrap().id, 1);
    }

    #[test]
    fn errors_name_line_and_field() {
        let jobs = read("0 1 1 1\n1 3 1 1 1\n");
        let err = jobs[1].as_ref().unwrap_err().to_string();
        assert_eq!(err, "t.tr:2: field `d3`: missing (d3)");
        let err = read("x 1 1 1")[0].as_ref().unwrap_err().to_string();
        assert!(err.contains("field `arrival_s`"), "{err}");
        let err = read("1 1 1 -2")[0].as_ref().unwrap_err().to_string();
        assert!(
            err.contains("field `d1`") && err.contains("non-negative"),
            "{err}"
        );
    }

    #[test]
    fn a_csv_file_is_named_as_csv_with_its_line() {
        // A header line, as in Google's CSV export.
        let err = read("time,type,collection_id\n0,0,1\n")[0]
            .as_ref()
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("t.tr:1: looks like CSV") && err.contains("pass --format"),
            "{err}"
        );
        // No header (Alibaba): the first data line, after good `.tr` lines and comments.
        let jobs = read("# a comment\n0 1 1 1\nt_1,j_1,1,Terminated,86517,86534,100,0.5\n");
        assert!(jobs[0].is_ok());
        let err = jobs[1].as_ref().unwrap_err().to_string();
        assert!(err.starts_with("t.tr:3: looks like CSV"), "{err}");
        // A `.tr` mistake without commas keeps its field-level message.
        let err = read("0 2 1 1")[0].as_ref().unwrap_err().to_string();
        assert!(err.contains("field `d2`"), "{err}");
    }

    #[test]
    fn writes_what_it_reads() {
        let jobs = read("1.25 2 1.5 1 2\n");
        let mut out = Vec::new();
        write_tr(&mut out, jobs[0].as_ref().unwrap()).unwrap();
        let again = read(std::str::from_utf8(&out).unwrap());
        assert_eq!(again[0].as_ref().unwrap(), jobs[0].as_ref().unwrap());
    }
}
