//! The entry point every service binary shares: resolve settings (exit 2 with the
//! reason when they are invalid), start logging, run `serve` on an actix System (a
//! plain `#[tokio::main]` cannot host actix actors) backed by a tokio runtime of
//! `--runtime-threads` (one thread by default: requests, actors and timers share it
//! and no message crosses threads), and turn the outcome into an exit code.

use crate::logging::{self, LogFormat};
use std::future::Future;
use std::process::ExitCode;

/// The name of a service's request threads (`--runtime-threads` > 1; tokio's
/// blocking pool too there).
pub const POOL_THREAD_NAME: &str = "megha-rt";
/// The name of a one-thread service's blocking-pool threads.
pub const BLOCKING_THREAD_NAME: &str = "megha-blocking";

/// How a service process runs, of its common settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcessSettings {
    pub log_format: LogFormat,
    /// 1: one thread for everything (tokio's current-thread runtime); N > 1: a
    /// multi-threaded runtime of N worker threads beside the actors' thread.
    pub runtime_threads: usize,
}

pub fn run_service<S, F, Fut>(
    role: &str,
    settings: anyhow::Result<S>,
    process: impl FnOnce(&S) -> ProcessSettings,
    serve: F,
) -> ExitCode
where
    F: FnOnce(S) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let settings = match settings {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(2);
        }
    };
    let process = process(&settings);
    logging::init(process.log_format);
    let threads = process.runtime_threads;
    let one_thread = threads <= 1;
    let system = actix_rt::System::with_tokio_rt(move || {
        // Named so that `top -H` and /proc tell them apart: on one thread only
        // tokio's blocking pool has threads of its own.
        let mut builder = if one_thread {
            let mut b = tokio::runtime::Builder::new_current_thread();
            b.thread_name(BLOCKING_THREAD_NAME);
            b
        } else {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(threads).thread_name(POOL_THREAD_NAME);
            b
        };
        builder
            .enable_all()
            .build()
            .expect("the tokio runtime must start")
    });
    if one_thread {
        tracing::info!("runtime: one thread for requests, actors and timers (--runtime-threads 1)");
    } else {
        tracing::info!(
            threads,
            "runtime: {threads} request threads beside the actors' thread (--runtime-threads)"
        );
    }
    match system.block_on(serve(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "{role} failed");
            ExitCode::FAILURE
        }
    }
}
