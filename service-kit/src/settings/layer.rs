//! Layered configuration for any role's settings struct: flags > environment > file >
//! defaults, with no list of fields to keep in step (a setting added to the struct is
//! read from the file by construction), and where each value came from
//! (`--print-config`).
//!
//! A role's settings struct derives `clap::Parser` (flags, each with `env = ...`: clap
//! ranks flags above the environment) and `serde::{Serialize, Deserialize}` (the TOML
//! file), every field an `Option`. [`load_file`] reads the file, refusing keys that
//! name no setting; [`layer`] fills every setting the flags and environment left unset
//! from it, through the serde data model; the role applies its defaults last.

use anyhow::{anyhow, bail, Context as _, Result};
use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::Path;
use std::process::ExitCode;
use toml::{Table, Value};

/// Settings that exist on the command line only, never in a file.
const FLAG_ONLY: &[&str] = &["config", "print_config", "help", "version"];

/// The keys a TOML file may set for `T`: its flags' ids (the long flag names with `_`).
fn file_keys<T: CommandFactory>() -> Vec<String> {
    T::command()
        .get_arguments()
        .map(|a| a.get_id().as_str().to_owned())
        .filter(|id| !FLAG_ONLY.contains(&id.as_str()))
        .collect()
}

/// Reads a TOML file of optional settings; `None` gives the empty (all unset) value.
/// A key that names no setting is refused with its line; a value of the wrong type
/// with toml's own message (line and column).
pub fn load_file<T: DeserializeOwned + Default + CommandFactory>(path: Option<&Path>) -> Result<T> {
    let Some(path) = path else {
        return Ok(T::default());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    let table: toml::Table =
        toml::from_str(&text).with_context(|| format!("in config file {}", path.display()))?;
    let known = file_keys::<T>();
    for key in table.keys() {
        if !known.iter().any(|k| k == key) {
            let line = text
                .lines()
                .position(|l| {
                    let l = l.trim_start();
                    l.strip_prefix(key.as_str())
                        .is_some_and(|rest| rest.trim_start().starts_with('='))
                })
                .map_or(String::new(), |n| format!(" (line {})", n + 1));
            bail!(
                "in config file {}{line}: unknown setting `{key}`; known settings (as in --print-config): {}",
                path.display(),
                known.join(", ")
            );
        }
    }
    toml::from_str(&text).with_context(|| format!("in config file {}", path.display()))
}

/// `flags` with every setting it leaves unset (`None`) taken from `file`. Generic over
/// the struct: no field can be forgotten. The values travel as TOML (which, unlike
/// JSON, holds NaN and infinities, so a bad float is still refused by the role).
pub fn layer<T: Serialize + DeserializeOwned>(flags: &T, file: &T) -> Result<T> {
    let mut merged = table(flags)?;
    for (key, value) in table(file)? {
        merged.entry(key).or_insert(value);
    }
    toml::Value::Table(merged)
        .try_into()
        .context("layering the config file")
}

/// Settings as a TOML table: unset (`None`) settings are absent.
fn table<T: Serialize>(settings: &T) -> Result<Table> {
    match toml::Value::try_from(settings) {
        Ok(toml::Value::Table(t)) => Ok(t),
        Ok(other) => Err(anyhow!("settings must be a struct, got {other}")),
        // TOML integers are i64: name the setting that does not fit.
        Err(e) => Err(match above_i64(settings) {
            Some((key, n)) => anyhow!(
                "--{} {n}: too large, at most {} (from the flag or its environment variable)",
                key.replace('_', "-"),
                i64::MAX
            ),
            None => anyhow!("settings as data: {e}"),
        }),
    }
}

/// The first setting whose value is an integer above `i64::MAX`, with its value.
fn above_i64<T: Serialize>(settings: &T) -> Option<(String, u64)> {
    let serde_json::Value::Object(map) = serde_json::to_value(settings).ok()? else {
        return None;
    };
    map.into_iter().find_map(|(key, v)| match v.as_u64() {
        Some(n) if i64::try_from(n).is_err() => Some((key, n)),
        _ => None,
    })
}

/// The parsed flags and environment of `T`, and the matches that say where each came
/// from (for [`effective`]). Exits like `T::parse()` on bad flags and `--help`.
pub fn parse<T: clap::Parser>() -> (T, ArgMatches) {
    let matches = T::command().get_matches();
    match T::from_arg_matches(&matches) {
        Ok(args) => (args, matches),
        Err(e) => e.exit(),
    }
}

/// The effective configuration, one line per setting in `--help` order, as TOML that
/// can serve as a config file: `key = value  # from flag --x | env NAME | file PATH`,
/// and `# key: default ...` for a setting left to its default (the default quoted from
/// its help). Credentials in URLs are redacted.
pub fn effective<T: Serialize + DeserializeOwned + Default + CommandFactory>(
    flags: &T,
    matches: &ArgMatches,
    config: Option<&Path>,
) -> Result<String> {
    let file: T = load_file(config)?;
    let file_values = table(&file)?;
    let merged = table(&layer(flags, &file)?)?;
    let command = T::command();
    let mut out = format!(
        "# effective configuration of {} (flags > environment > file > defaults)\n",
        command.get_name()
    );
    if let Some(path) = config {
        out.push_str(&format!("# config file: {}\n", path.display()));
    }
    for arg in command.get_arguments() {
        let key = arg.get_id().as_str();
        if FLAG_ONLY.contains(&key) {
            continue;
        }
        let Some(value) = merged.get(key) else {
            let help = arg
                .get_long_help()
                .or(arg.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default();
            match default_in_help(&help) {
                Some(d) => out.push_str(&format!("# {key}: default ({d})\n")),
                None => out.push_str(&format!("# {key}: not set\n")),
            }
            continue;
        };
        let source = match matches.value_source(key) {
            Some(ValueSource::CommandLine) => {
                format!("flag --{}", arg.get_long().unwrap_or(key))
            }
            Some(ValueSource::EnvVariable) => format!(
                "env {}",
                arg.get_env()
                    .map_or(String::new(), |e| e.to_string_lossy().into_owned())
            ),
            _ if file_values.contains_key(key) => match config {
                Some(path) => format!("file {}", path.display()),
                None => "file".to_owned(),
            },
            _ => "default".to_owned(),
        };
        out.push_str(&format!("{key} = {}  # {source}\n", redacted(value)));
    }
    Ok(out)
}

/// `--print-config`: prints the effective configuration of `args` ([`effective`]),
/// then checks that it resolves (`resolve`, the role's own checks and defaults).
/// Exits 0, or 2 saying why when the file cannot be read or the settings do not
/// resolve.
pub fn print_config<T>(
    args: &T,
    matches: &ArgMatches,
    config: Option<&Path>,
    resolve: impl FnOnce(T) -> Result<()>,
) -> ExitCode
where
    T: Serialize + DeserializeOwned + Default + CommandFactory + Clone,
{
    match effective(args, matches, config) {
        Ok(text) => print!("{text}"),
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(2);
        }
    }
    match resolve(args.clone()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("# does not resolve: {e:#}");
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The default a help text states ("... Default 100." -> "100").
fn default_in_help(help: &str) -> Option<String> {
    let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
    let at = flat.rfind("Default")?;
    let rest = flat[at + "Default".len()..].trim_start_matches([':', ' ']);
    let end = rest
        .match_indices('.')
        .find(|(i, _)| rest[i + 1..].is_empty() || rest[i + 1..].starts_with(' '))
        .map_or(rest.len(), |(i, _)| i);
    let text = rest[..end].trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// A value as TOML, with the password of any URL in it hidden.
fn redacted(value: &Value) -> String {
    match value {
        Value::String(s) if s.contains("://") => Value::String(crate::amqp::redact(s)).to_string(),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(redacted).collect::<Vec<_>>().join(", ")
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    /// A role's settings in miniature.
    #[derive(clap::Parser, Debug, Default, PartialEq, Serialize, Deserialize)]
    #[command(name = "demo")]
    #[serde(default)]
    struct Demo {
        #[arg(long)]
        #[serde(skip)]
        config: Option<std::path::PathBuf>,
        /// How many. Default 100.
        #[arg(long, env = "MEGHA_TEST_LAYER_COUNT")]
        count: Option<u32>,
        /// Where. Default 127.0.0.1:8080 (port 0 picks one).
        #[arg(long)]
        listen: Option<String>,
        /// The broker.
        #[arg(long)]
        amqp: Option<String>,
        /// Bytes.
        #[arg(long)]
        max_bytes: Option<u64>,
        #[command(flatten)]
        #[serde(flatten)]
        shared: Shared,
    }

    #[derive(clap::Args, Debug, Default, PartialEq, Serialize, Deserialize)]
    #[serde(default)]
    struct Shared {
        /// Names. Default none.
        #[arg(long, value_delimiter = ',')]
        names: Option<Vec<String>>,
    }

    fn file(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("demo.toml");
        std::fs::write(&path, text).expect("write");
        (dir, path)
    }

    #[test]
    fn flags_win_the_file_fills_the_rest_flattened_fields_included() {
        let (_d, path) = file("count = 7\nlisten = \"0.0.0.0:1\"\nnames = [\"a\", \"b\"]\n");
        let flags =
            <Demo as clap::Parser>::try_parse_from(["demo", "--listen", "x:2"]).expect("parse");
        let from_file: Demo = load_file(Some(&path)).expect("file");
        let merged = layer(&flags, &from_file).expect("layer");
        assert_eq!(merged.count, Some(7));
        assert_eq!(merged.listen.as_deref(), Some("x:2"));
        assert_eq!(
            merged.shared.names,
            Some(vec!["a".to_owned(), "b".to_owned()])
        );
    }

    #[test]
    fn an_unknown_key_is_refused_with_its_line_and_a_bad_value_names_its_key() {
        let (_d, path) = file("count = 1\n\nlistn = \"x\"\n");
        let err = load_file::<Demo>(Some(&path)).expect_err("typo");
        let text = format!("{err:#}");
        assert!(
            text.contains("unknown setting `listn`") && text.contains("line 3"),
            "{text}"
        );
        assert!(
            text.contains("listen"),
            "the known settings are listed: {text}"
        );
        let (_d2, path) = file("count = \"many\"\n");
        let err = format!("{:#}", load_file::<Demo>(Some(&path)).expect_err("type"));
        assert!(err.contains("count"), "{err}");
        let (_d3, path) = file("config = \"other.toml\"\n");
        assert!(
            load_file::<Demo>(Some(&path)).is_err(),
            "config is a flag only"
        );
    }

    #[test]
    fn the_effective_configuration_says_where_each_value_came_from() {
        let (_d, path) = file("listen = \"0.0.0.0:1\"\n");
        let cmd = Demo::command();
        let matches = cmd
            .try_get_matches_from(["demo", "--amqp", "amqp://u:secret@h/%2f", "--names", "a,b"])
            .expect("parse");
        let flags = <Demo as clap::FromArgMatches>::from_arg_matches(&matches).expect("args");
        let text = effective(&flags, &matches, Some(&path)).expect("effective");
        assert!(text.contains("listen = \"0.0.0.0:1\"  # file "), "{text}");
        assert!(
            text.contains("amqp = \"amqp://u:***@h/%2f\"  # flag --amqp"),
            "{text}"
        );
        assert!(!text.contains("secret"), "{text}");
        assert!(
            text.contains("names = [\"a\", \"b\"]  # flag --names"),
            "{text}"
        );
        assert!(text.contains("# count: default (100)"), "{text}");
    }

    #[test]
    fn an_integer_too_large_for_a_setting_names_its_flag() {
        let flags =
            <Demo as clap::Parser>::try_parse_from(["demo", "--max-bytes", &u64::MAX.to_string()])
                .expect("parse");
        let err = format!(
            "{:#}",
            layer(&flags, &Demo::default()).expect_err("too large")
        );
        assert!(
            err.contains("--max-bytes 18446744073709551615: too large"),
            "{err}"
        );
        let flags =
            <Demo as clap::Parser>::try_parse_from(["demo", "--max-bytes", &i64::MAX.to_string()])
                .expect("parse");
        let merged = layer(&flags, &Demo::default()).expect("the largest value fits");
        assert_eq!(merged.max_bytes, Some(i64::MAX as u64));
    }

    #[test]
    fn defaults_are_quoted_from_help() {
        assert_eq!(
            default_in_help("How many. Default 100.").as_deref(),
            Some("100")
        );
        assert_eq!(
            default_in_help("Where. Default 127.0.0.1:8080 (port 0\n picks one).").as_deref(),
            Some("127.0.0.1:8080 (port 0 picks one)")
        );
        assert_eq!(
            default_in_help("HTTPS. Default: plain HTTP (fine).").as_deref(),
            Some("plain HTTP (fine)")
        );
        assert_eq!(default_in_help("No default here."), None);
    }
}
