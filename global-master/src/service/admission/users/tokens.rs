//! The tokens file: each user's token (or its SHA-256), queues, preempting
//! priority classes and admin flag, read again when the file changes
//! ([`UserTable`]), and the [`Caller`] a token names.

use anyhow::{bail, Context as _, Result};
use common::priority::PriorityClasses;
use serde::Deserialize;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use subtle::ConstantTimeEq as _;

/// The caller of a user route, as the handlers see it (a request extension).
#[derive(Clone, Debug)]
pub struct Caller {
    pub user: Arc<str>,
    pub admin: bool,
    /// Queue names this user may submit to; `None`: any.
    queues: Option<Arc<HashSet<String>>>,
    /// The preempting priority classes this user may name (exact names); `None`:
    /// any. Classes that do not preempt are open to every user.
    classes: Option<Arc<HashSet<String>>>,
    /// At most this many jobs of a preempting class in any minute, per GM
    /// ([`super::preempting`]); `None`: no cap.
    preempting_per_minute: Option<u32>,
}

impl Caller {
    /// The caller of open mode: an admin.
    pub fn anonymous() -> Self {
        Caller {
            user: "anonymous".into(),
            admin: true,
            queues: None,
            classes: None,
            preempting_per_minute: None,
        }
    }

    pub fn may_use(&self, queue: &str) -> bool {
        self.admin || self.queues.as_ref().is_none_or(|q| q.contains(queue))
    }

    /// Whether this user may name the priority class `class` (exact name) when it
    /// preempts: an admin may, and a user whose `priority_classes` lists it or `"*"`.
    pub fn may_preempt_as(&self, class: &str) -> bool {
        self.admin || self.classes.as_ref().is_none_or(|c| c.contains(class))
    }

    /// The cap on this user's jobs of a preempting class per minute (none for an
    /// admin).
    pub fn preempting_per_minute(&self) -> Option<u32> {
        self.preempting_per_minute.filter(|_| !self.admin)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UsersFile {
    #[serde(default)]
    users: Vec<UserEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UserEntry {
    name: String,
    /// The token itself, or ...
    #[serde(default)]
    token: Option<String>,
    /// ... its SHA-256 (64 hex digits): the file then holds no usable token.
    #[serde(default)]
    token_sha256: Option<String>,
    #[serde(default)]
    queues: Vec<String>,
    #[serde(default)]
    admin: bool,
    /// The preempting priority classes this user may name (`"*"`: any); absent:
    /// none (the classes that do not preempt are open to all).
    #[serde(default)]
    priority_classes: Vec<String>,
    /// At most this many jobs of a preempting class in any minute (per GM);
    /// absent: no cap.
    #[serde(default)]
    preempting_jobs_per_minute: Option<i64>,
}

/// The users of one reading of the tokens file.
#[derive(Default)]
pub struct Users {
    /// The SHA-256 of each user's token (from `token` or `token_sha256`).
    entries: Vec<([u8; 32], Caller)>,
}

impl std::fmt::Debug for Users {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Users({} entries, tokens redacted)", self.entries.len())
    }
}

/// The shortest user token accepted.
pub const MIN_TOKEN_LEN: usize = 16;

impl Users {
    /// Parses a tokens file's text (`json`: JSON, else TOML) for a GM of priority
    /// classes `classes`; errors name the entry and field, never a token.
    pub fn parse(text: &str, json: bool, classes: &PriorityClasses) -> Result<Self> {
        let file: UsersFile = if json {
            serde_json::from_str(text).context("not a JSON tokens file")?
        } else {
            toml::from_str(text).context("not a TOML tokens file")?
        };
        let mut names = HashSet::new();
        let mut digests: Vec<[u8; 32]> = Vec::new();
        let mut entries = Vec::new();
        for (i, u) in file.users.iter().enumerate() {
            let name = u.name.trim();
            if name.is_empty() {
                bail!("users[{i}].name: must not be empty");
            }
            if !names.insert(name.to_owned()) {
                bail!("users[{i}].name: `{name}` appears twice");
            }
            let digest = match (&u.token, &u.token_sha256) {
                (Some(token), None) => {
                    if token.len() < MIN_TOKEN_LEN || token.chars().any(char::is_whitespace) {
                        bail!("users[{i}].token (user {name}): at least {MIN_TOKEN_LEN} characters, no whitespace");
                    }
                    service_kit::roles::digest(token.as_bytes())
                }
                (None, Some(hex)) => service_kit::roles::unhex(hex.trim()).with_context(|| {
                    format!("users[{i}].token_sha256 (user {name}): 64 hex digits, the SHA-256 of the token (e.g. `printf %s TOKEN | sha256sum`)")
                })?,
                _ => bail!("users[{i}].token (user {name}): give exactly one of token and token_sha256"),
            };
            if digests.contains(&digest) {
                bail!("users[{i}].token (user {name}): the same token as another user");
            }
            digests.push(digest);
            if !u.admin && u.queues.is_empty() {
                bail!("users[{i}].queues (user {name}): name the queues this user may use (\"*\": any)");
            }
            let queues = (!u.queues.iter().any(|q| q == "*"))
                .then(|| Arc::new(u.queues.iter().cloned().collect::<HashSet<_>>()));
            entries.push((
                digest,
                Caller {
                    user: name.into(),
                    admin: u.admin,
                    queues,
                    classes: check_classes(i, name, &u.priority_classes, classes)?,
                    preempting_per_minute: check_cap(i, name, u.preempting_jobs_per_minute)?,
                },
            ));
        }
        Ok(Users { entries })
    }

    /// Reads and parses a tokens file.
    pub fn load(path: &Path, classes: &PriorityClasses) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--tokens-file {}", path.display()))?;
        let json = path.extension().is_some_and(|e| e == "json");
        Self::parse(&text, json, classes)
            .with_context(|| format!("--tokens-file {}", path.display()))
    }

    /// The user of `token`: its SHA-256 against every entry's (constant time
    /// each, every entry compared), so the time taken does not say which matched.
    pub fn find(&self, token: &[u8]) -> Option<&Caller> {
        let presented = service_kit::roles::digest(token);
        let mut found = None;
        for (t, caller) in &self.entries {
            if bool::from(t.ct_eq(&presented)) {
                found = Some(caller);
            }
        }
        found
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// User `i`'s (`name`'s) `priority_classes`: `None` for `"*"`, else the names,
/// each a class of `classes` (exact spelling, as jobs name them). A listed class
/// that does not preempt is accepted (every user may name it anyway), with a warning.
fn check_classes(
    i: usize,
    name: &str,
    listed: &[String],
    classes: &PriorityClasses,
) -> Result<Option<Arc<HashSet<String>>>> {
    if listed.iter().any(|c| c == "*") {
        return Ok(None);
    }
    for class in listed {
        match classes.by_name(class) {
            None => bail!(
                "users[{i}].priority_classes (user {name}): unknown priority class `{class}`; the classes are {} (--priority-class), or \"*\"",
                classes.names()
            ),
            Some(c) if !c.preempting => tracing::warn!(
                user = name,
                class = class.as_str(),
                "tokens file: users[{i}].priority_classes lists a class that does not preempt; every user may name it anyway"
            ),
            Some(_) => {}
        }
    }
    Ok(Some(Arc::new(listed.iter().cloned().collect())))
}

/// User `i`'s (`name`'s) `preempting_jobs_per_minute`: 1 to
/// [`super::preempting::MAX_PER_MINUTE`] when given.
fn check_cap(i: usize, name: &str, cap: Option<i64>) -> Result<Option<u32>> {
    let max = super::preempting::MAX_PER_MINUTE;
    match cap {
        None => Ok(None),
        Some(n) if (1..=i64::from(max)).contains(&n) => Ok(Some(n as u32)),
        Some(n) => bail!(
            "users[{i}].preempting_jobs_per_minute (user {name}): {n}; 1 to {max} (leave it out for no cap)"
        ),
    }
}

/// The users of a tokens file, read again when it changes.
#[derive(Debug)]
pub struct UserTable {
    path: PathBuf,
    /// The GM's priority classes, which the file's `priority_classes` must name.
    classes: Arc<PriorityClasses>,
    current: RwLock<Arc<Users>>,
    stamp: Mutex<Option<(std::time::SystemTime, u64)>>,
    pub reloads: AtomicU64,
    pub reload_failures: AtomicU64,
}

fn stamp(path: &Path) -> Option<(std::time::SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

impl UserTable {
    pub fn load(path: &Path, classes: Arc<PriorityClasses>) -> Result<Self> {
        let users = Users::load(path, &classes)?;
        Ok(UserTable {
            path: path.to_owned(),
            classes,
            current: RwLock::new(Arc::new(users)),
            stamp: Mutex::new(stamp(path)),
            reloads: AtomicU64::new(0),
            reload_failures: AtomicU64::new(0),
        })
    }

    pub fn users(&self) -> Arc<Users> {
        self.current
            .read()
            .map(|u| u.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// Reads the file again; on error keeps the current table.
    pub fn reload(&self, why: &str) {
        *self.stamp.lock().unwrap_or_else(|e| e.into_inner()) = stamp(&self.path);
        match Users::load(&self.path, &self.classes) {
            Ok(users) => {
                let n = users.len();
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(users);
                self.reloads.fetch_add(1, Ordering::Relaxed);
                tracing::info!(file = %self.path.display(), users = n, why, "tokens file reloaded");
            }
            Err(e) => {
                self.reload_failures.fetch_add(1, Ordering::Relaxed);
                tracing::error!(
                    error = format!("{e:#}"),
                    why,
                    "tokens file not reloaded; keeping the previous users"
                );
            }
        }
    }

    /// Reloads if the file's modification time or size changed since the last read.
    pub fn reload_if_changed(&self) {
        let now = stamp(&self.path);
        let changed = *self.stamp.lock().unwrap_or_else(|e| e.into_inner()) != now;
        if changed {
            self.reload("file changed");
        }
    }

    /// Reloads on SIGHUP and when the file changes (polled every `period`), until
    /// the runtime stops.
    pub fn watch(self: &Arc<Self>, period: Duration) {
        let table = self.clone();
        tokio::spawn(async move {
            #[cfg(unix)]
            let mut hup =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
            loop {
                #[cfg(unix)]
                {
                    let hangup = async {
                        match hup.as_mut() {
                            Some(h) => h.recv().await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        _ = hangup => { table.reload("SIGHUP"); continue; }
                        _ = tokio::time::sleep(period) => {}
                    }
                }
                #[cfg(not(unix))]
                tokio::time::sleep(period).await;
                table.reload_if_changed();
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::tests::FILE;

    /// Issue 37: `priority_classes` lists the preempting classes a user may name
    /// (`"*"`: any); a name the GM does not know fails the file, naming the entry.
    #[test]
    fn priority_classes_name_the_gms_classes() {
        let classes = PriorityClasses::parse(
            &["batch:0,urgent:100:preempting,top:200:preempting".into()],
            None,
            1000,
        )
        .expect("classes");
        let file = |list: &str| {
            format!("{FILE}\n[[users]]\nname = \"bob\"\ntoken = \"bob-token-0123456789\"\nqueues = [\"a\"]\npriority_classes = {list}\n")
        };
        let bob = |list: &str| {
            let users = Users::parse(&file(list), false, &classes).expect(list);
            let bob = users.find(b"bob-token-0123456789").expect("bob").clone();
            let alice = users.find(b"alice-token-0123456789").expect("alice");
            assert!(!alice.may_preempt_as("urgent"), "alice lists none");
            let root = users.find(b"root-token-0123456789").expect("root");
            assert!(root.may_preempt_as("urgent") && root.may_preempt_as("top"));
            bob
        };
        let listed = bob(r#"["urgent"]"#);
        assert!(listed.may_preempt_as("urgent") && !listed.may_preempt_as("top"));
        assert!(!listed.may_preempt_as("URGENT"), "exact names");
        let any = bob(r#"["*"]"#);
        assert!(any.may_preempt_as("urgent") && any.may_preempt_as("top"));
        // A class that does not preempt is accepted (every user may name it).
        assert!(!bob(r#"["batch"]"#).may_preempt_as("urgent"));
        assert!(!bob("[]").may_preempt_as("urgent"));
        for unknown in [
            r#"["vip"]"#,
            r#"["urgent", "URGENT"]"#,
            r#"["urgent "]"#,
            r#"[""]"#,
        ] {
            let err = format!(
                "{:#}",
                Users::parse(&file(unknown), false, &classes).expect_err(unknown)
            );
            assert!(
                err.contains("users[2].priority_classes") && err.contains("bob"),
                "{unknown}: {err}"
            );
        }
        let err = format!(
            "{:#}",
            Users::parse(&file("\"urgent\""), false, &classes).expect_err("a string")
        );
        assert!(err.contains("priority_classes"), "{err}");
        // The same in JSON.
        let json = r#"{"users":[{"name":"bob","token":"bob-token-0123456789","queues":["a"],"priority_classes":["top"]}]}"#;
        let users = Users::parse(json, true, &classes).expect("json");
        assert!(users
            .find(b"bob-token-0123456789")
            .expect("bob")
            .may_preempt_as("top"));
    }
}
