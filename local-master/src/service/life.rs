//! The LM's life (its incarnation: in its snapshots, its workers' assignments and
//! its start orders), taken from a file of its data dir when it has one, so that
//! it does not depend on the clock (issue 33): each start takes
//! `max(start time in µs, previous life + 1)` and writes it durably before the LM
//! serves, so a host whose clock went back still gets a life above its previous
//! one and never repeats it. Without a data dir, the life is the start time (a
//! clock set back could then repeat an earlier life: GMs and workers tell lives
//! apart by identity, so only an exact repeat would confuse them).

use anyhow::{Context, Result};
use std::io::Write;
use std::path::Path;

const FILE: &str = "life";

/// The life of an LM starting at `now_us` with data dir `dir` (created 0700 if
/// missing): above the one written there by the previous start, written back
/// (`fsync`ed file and directory) before it is returned. A file that is not a
/// number is an error naming it: the LM does not start on a state it cannot read.
pub fn next(dir: &Path, now_us: u64) -> Result<u64> {
    create_private_dir(dir)?;
    let path = dir.join(FILE);
    let previous = match std::fs::read_to_string(&path) {
        Ok(text) => Some(text.trim().parse::<u64>().with_context(|| {
            format!(
                "{}: not an LM life (a number); remove it to start afresh",
                path.display()
            )
        })?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let life = match previous {
        Some(p) => now_us.max(p.saturating_add(1)),
        None => now_us.max(1),
    };
    write_durably(dir, FILE, &format!("{life}\n"))?;
    if previous.is_some_and(|p| p >= now_us) {
        tracing::warn!(dir = %dir.display(), life, now_us, "this host's clock is behind this LM's previous life: the life goes on from the data dir");
    }
    Ok(life)
}

/// Replaces `dir/name` with `text`, durably: written to a fresh temporary file
/// (a link planted at its name is replaced, not written through), `fsync`ed,
/// renamed over the file, the directory `fsync`ed. `dir` must exist.
pub(crate) fn write_durably(dir: &Path, name: &str, text: &str) -> Result<()> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    let _ = std::fs::remove_file(&tmp);
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        f.write_all(text.as_bytes()).and_then(|()| f.sync_all())?;
    }
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync {}", dir.display()))
}

/// `dir`, created 0700 if missing; a symlink is refused (the LM would write through
/// it).
pub(crate) fn create_private_dir(dir: &Path) -> Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => {
            anyhow::bail!("{}: a symlink; give the LM a real directory", dir.display())
        }
        Ok(m) if !m.is_dir() => anyhow::bail!("{}: not a directory", dir.display()),
        Ok(_) => Ok(()),
        Err(_) => {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .with_context(|| format!("cannot create the data dir {}", dir.display()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("megha-lm-life-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn each_start_takes_a_life_above_the_last_whatever_the_clock() {
        let dir = scratch("clock");
        assert_eq!(next(&dir, 1_000).unwrap(), 1_000, "first start: the clock");
        assert_eq!(next(&dir, 5_000).unwrap(), 5_000, "clock ahead: the clock");
        // The clock went back: the life goes on from the file, never repeats.
        assert_eq!(next(&dir, 10).unwrap(), 5_001);
        assert_eq!(next(&dir, 5_001).unwrap(), 5_002);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_damaged_file_or_a_symlink_stops_the_start_naming_it() {
        let dir = scratch("bad");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(FILE), "yesterday\n").unwrap();
        let e = next(&dir, 7).unwrap_err().to_string();
        assert!(e.contains("life") && e.contains("not an LM life"), "{e}");
        let link = scratch("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        let e = next(&link, 7).unwrap_err().to_string();
        assert!(e.contains("symlink"), "{e}");
        let _ = std::fs::remove_file(&link);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A link planted at the temporary name is replaced, not written through.
    #[test]
    fn a_link_planted_at_the_temporary_file_is_not_written_through() {
        let dir = scratch("tmp-link");
        std::fs::create_dir_all(&dir).unwrap();
        let victim = scratch("victim");
        std::fs::write(&victim, "keep me\n").unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("life.tmp")).unwrap();
        assert_eq!(next(&dir, 42).unwrap(), 42);
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me\n");
        assert_eq!(
            std::fs::read_to_string(dir.join(FILE)).unwrap().trim(),
            "42"
        );
        let _ = std::fs::remove_file(&victim);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
