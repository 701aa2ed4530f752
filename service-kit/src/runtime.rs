//! The entry point every service binary shares: resolve settings (exit 2 with the
//! reason when they are invalid), start logging, run `serve` on an actix System backed
//! by a multi-threaded tokio runtime (a plain `#[tokio::main]` cannot host actix
//! actors), and turn the outcome into an exit code.

use crate::logging::{self, LogFormat};
use std::future::Future;
use std::process::ExitCode;

pub fn run_service<S, F, Fut>(
    role: &str,
    settings: anyhow::Result<S>,
    log_format: impl FnOnce(&S) -> LogFormat,
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
    logging::init(log_format(&settings));
    let system = actix_rt::System::with_tokio_rt(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("the tokio runtime must start")
    });
    match system.block_on(serve(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "{role} failed");
            ExitCode::FAILURE
        }
    }
}
