//! The values of `megha`'s flags (seconds, `K=V`, `--after JOB[:WHEN]`, `--cwd`), job
//! files, and query encoding: parsing kept apart from the commands.

use anyhow::{Context, Result};
use serde_json::Value;

/// A positive number of seconds (`--poll-interval`, `--timeout`...).
pub(crate) fn positive_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a positive number of seconds")),
    }
}

/// `--after JOB[:WHEN]`: a job id and `ok` (the default), `any` or `failed`.
pub(crate) fn after_job(s: &str) -> Result<(u64, String), String> {
    let (job, when) = s.split_once(':').unwrap_or((s, "ok"));
    let job = job
        .parse()
        .map_err(|_| format!("{job:?} is not a job id"))?;
    match when {
        "ok" | "any" | "failed" => Ok((job, when.to_owned())),
        other => Err(format!("{other:?}: WHEN is ok, any or failed")),
    }
}

/// `K=V` of `--env` and `--label`: a non-empty name without `=`.
pub(crate) fn key_value(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("{s:?} is not NAME=VALUE")),
    }
}

/// `--cwd DIR` as an absolute path (a relative one from the current directory).
pub(crate) fn absolute(dir: &std::path::Path) -> Result<String> {
    let path = if dir.is_absolute() {
        dir.to_owned()
    } else {
        std::env::current_dir()
            .context("the current directory, for --cwd")?
            .join(dir)
    };
    path.to_str()
        .map(str::to_owned)
        .with_context(|| format!("--cwd {}: not UTF-8", path.display()))
}

/// A job file: JSON, or TOML of the same shape (`.toml`).
pub(crate) fn read_job_file(path: &std::path::Path) -> Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    if path.extension().is_some_and(|e| e == "toml") {
        let value: toml::Value =
            toml::from_str(&text).with_context(|| format!("{}: not TOML", path.display()))?;
        return serde_json::to_value(value).context("TOML to JSON");
    }
    serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))
}

/// The line of a TOML job file's `text` where the value at the GM's JSON path
/// `field` (`tasks[1].resources.cpu_millis`) is written: the longest prefix of the
/// path that the file has (a missing key: its table's line); `None` when not even
/// the first part is there.
pub(crate) fn toml_line(text: &str, field: &str) -> Option<usize> {
    use toml::de::{DeTable, DeValue};
    let doc = DeTable::parse(text).ok()?;
    let mut span: Option<std::ops::Range<usize>> = None;
    let mut table: &DeTable = doc.get_ref();
    let mut value: Option<&DeValue> = None;
    for part in field.split('.') {
        let (key, indexes) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if let Some(DeValue::Table(t)) = value {
            table = t;
        } else if value.is_some() {
            break;
        }
        let Some((_, v)) = table.iter().find(|(k, _)| k.get_ref().as_ref() == key) else {
            break;
        };
        span = Some(v.span());
        value = Some(v.get_ref());
        for index in indexes.split(['[', ']']).filter(|s| !s.is_empty()) {
            let (Some(DeValue::Array(items)), Ok(i)) = (value, index.parse::<usize>()) else {
                break;
            };
            let Some(item) = items.get(i) else { break };
            span = Some(item.span());
            value = Some(item.get_ref());
        }
    }
    let start = span?.start.min(text.len());
    Some(text[..start].matches('\n').count() + 1)
}

/// Percent-encodes a query value.
pub(crate) fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::after_job;

    #[test]
    fn a_field_path_points_at_its_toml_line() {
        let text = "name = \"x\"\n\n[[tasks]]\nresources = { cpu_millis = 500, memory_mb = 64 }\n\n[[tasks]]\n[tasks.resources]\ncpu_millis = 0\nmemory_mb = 64\n";
        assert_eq!(super::toml_line(text, "name"), Some(1));
        assert_eq!(
            super::toml_line(text, "tasks[1].resources.cpu_millis"),
            Some(8)
        );
        assert_eq!(
            super::toml_line(text, "tasks[0].resources.cpu_millis"),
            Some(4)
        );
        // A key the file does not have: the closest part it has.
        assert_eq!(super::toml_line(text, "tasks[1].executor"), Some(6));
        assert_eq!(super::toml_line(text, "retry.max_attempts"), None);
    }

    #[test]
    fn after_names_a_job_and_when() {
        assert_eq!(after_job("42"), Ok((42, "ok".to_owned())));
        assert_eq!(after_job("42:any"), Ok((42, "any".to_owned())));
        assert_eq!(after_job("42:failed"), Ok((42, "failed".to_owned())));
        assert!(after_job("42:sometimes")
            .unwrap_err()
            .contains("ok, any or failed"));
        assert!(after_job("x").unwrap_err().contains("not a job id"));
    }
}
