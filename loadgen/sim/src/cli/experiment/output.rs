//! Where every experiment writes its result: `DIR/summary.json`.

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Writes `summary` (pretty JSON) to `out/summary.json`, creating `out`; returns
/// the file's path.
pub fn write_summary(out: &Path, summary: &serde_json::Value) -> Result<PathBuf> {
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let path = out.join("summary.json");
    std::fs::write(&path, serde_json::to_string_pretty(summary)? + "\n")
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}
