//! Configuration sources. Each service declares one struct of optional settings that
//! derives both `clap::Args` (flags, with `env = ...`) and `serde::Deserialize` (the
//! TOML file); clap already ranks flags above environment variables, then
//! [`merge_options!`] fills what is still unset from the file, and the service applies
//! its defaults last: flags > env > file > defaults.

use anyhow::{Context, Result};
use serde::de::DeserializeOwned;
use std::path::Path;

/// Reads a TOML file of optional settings; `None` gives the empty (all unset) value.
pub fn load_file<T: DeserializeOwned + Default>(path: Option<&Path>) -> Result<T> {
    let Some(path) = path else {
        return Ok(T::default());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("in config file {}", path.display()))
}

/// `merge_options!(primary, fallback, a, b, c)` sets each listed `Option` field of
/// `primary` that is `None` to the value of the same field in `fallback`.
#[macro_export]
macro_rules! merge_options {
    ($primary:expr, $fallback:expr, $($field:ident),+ $(,)?) => {
        $( if $primary.$field.is_none() { $primary.$field = $fallback.$field.clone(); } )+
    };
}

/// Splits a comma-separated list, dropping empty items.
pub fn split_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_owned)
        .collect()
}
