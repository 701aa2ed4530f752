//! Opening any supported trace format behind one interface, for the CLI and the
//! simulator: an iterator of jobs that can also say what it dropped.

use super::alibaba::{AlibabaConfig, AlibabaReader, AlibabaTable};
use super::google::{GoogleConfig, GoogleFormat, GoogleReader};
use super::tpch::{TpchConfig, TpchSource};
use super::tr::TrReader;
use super::{ReadReport, TraceError, TraceJob};
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

/// The trace formats this crate reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TraceFormat {
    /// Sparrow / Eagle / Megha `.tr`.
    Tr,
    /// Alibaba 2018 `batch_task.csv`.
    AlibabaTask,
    /// Alibaba 2018 `batch_instance.csv`.
    AlibabaInstance,
    /// Google 2019 instance events, CSV with a header line.
    GoogleCsv,
    /// Google 2019 instance events, JSON lines.
    GoogleJson,
    /// TPC-H query DAGs (`tpch-dags.json`): DAG jobs drawn with the `--tpch-*` flags.
    Tpch,
}

/// A streaming reader of any format.
pub trait TraceSource: Iterator<Item = Result<TraceJob, TraceError>> {
    /// What was read, dropped and kept so far (complete once iteration has ended).
    fn report(&self) -> &ReadReport;
}

impl<R: Read> TraceSource for AlibabaReader<R> {
    fn report(&self) -> &ReadReport {
        AlibabaReader::report(self)
    }
}

impl TraceSource for TpchSource {
    fn report(&self) -> &ReadReport {
        TpchSource::report(self)
    }
}

impl<R: Read> TraceSource for GoogleReader<R> {
    fn report(&self) -> &ReadReport {
        GoogleReader::report(self)
    }
}

/// A `.tr` reader with job and task counts (the format has nothing to drop).
#[derive(Debug)]
pub struct CountedTr {
    inner: TrReader<BufReader<File>>,
    report: ReadReport,
}

impl Iterator for CountedTr {
    type Item = Result<TraceJob, TraceError>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.inner.next()?;
        if let Ok(job) = &item {
            self.report.records += 1;
            self.report.jobs += 1;
            self.report.tasks += job.tasks.len() as u64;
        }
        Some(item)
    }
}

impl TraceSource for CountedTr {
    fn report(&self) -> &ReadReport {
        &self.report
    }
}

/// Reader settings for every format (each uses its own).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SourceConfig {
    pub alibaba: AlibabaConfig,
    pub google: GoogleConfig,
    pub tpch: TpchConfig,
}

/// Opens `path` as `format`.
pub fn open_trace(
    path: &Path,
    format: TraceFormat,
    cfg: &SourceConfig,
) -> Result<Box<dyn TraceSource>, TraceError> {
    Ok(match format {
        TraceFormat::Tr => Box::new(CountedTr {
            inner: TrReader::open(path)?,
            report: ReadReport::default(),
        }),
        TraceFormat::AlibabaTask => {
            Box::new(AlibabaReader::open(path, AlibabaTable::Task, cfg.alibaba)?)
        }
        TraceFormat::AlibabaInstance => Box::new(AlibabaReader::open(
            path,
            AlibabaTable::Instance,
            cfg.alibaba,
        )?),
        TraceFormat::GoogleCsv => {
            Box::new(GoogleReader::open(path, GoogleFormat::Csv, cfg.google)?)
        }
        TraceFormat::GoogleJson => Box::new(GoogleReader::open(
            path,
            GoogleFormat::JsonLines,
            cfg.google,
        )?),
        TraceFormat::Tpch => Box::new(TpchSource::open(path, cfg.tpch.clone())?),
    })
}
