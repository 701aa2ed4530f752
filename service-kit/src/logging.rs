//! `tracing` set-up: human-readable text by default, one JSON object per line with
//! `--log-format json`. The level comes from `RUST_LOG` (default `info`).

use serde::{Deserialize, Serialize};
use tracing_subscriber::EnvFilter;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Installs the global subscriber (a second call is a no-op).
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Logs a message's [`common::protocol::facts::Note`] at its level, with the given
/// fields: `log_note!(&note, %lm)`. A macro, so that the event's target is the
/// caller's module (as a `tracing::info!` there would be).
#[macro_export]
macro_rules! log_note {
    ($note:expr, $($field:tt)+) => {{
        let note: &$crate::logging::Note = $note;
        match note.level {
            $crate::logging::Level::Debug => {
                $crate::logging::tracing::debug!($($field)+, "{}", note.text)
            }
            $crate::logging::Level::Info => {
                $crate::logging::tracing::info!($($field)+, "{}", note.text)
            }
            $crate::logging::Level::Warn => {
                $crate::logging::tracing::warn!($($field)+, "{}", note.text)
            }
        }
    }};
}

#[doc(hidden)]
pub use common::protocol::facts::{Level, Note};
#[doc(hidden)]
pub use tracing;
