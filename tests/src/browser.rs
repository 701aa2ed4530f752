//! A headless Chromium (Debian's `chromium` package) for the dashboard test: the DOM
//! of a page after its script ran (`--dump-dom`), and a screenshot. Fails loudly
//! when Chromium is missing, naming the package to install (`scripts/test.sh`
//! installs it).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Chromium binary: `$MEGHA_CHROMIUM`, else the first of `chromium`,
/// `chromium-browser`, `google-chrome` on the PATH.
pub fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("MEGHA_CHROMIUM") {
        return PathBuf::from(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in ["chromium", "chromium-browser", "google-chrome"] {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "headless Chromium not found: install Debian's `chromium` package (apt-get install chromium; scripts/test.sh does) or set MEGHA_CHROMIUM to a Chrome binary"
    );
}

/// Flags of every run: headless, no sandbox (tests run as root in CI), a fresh
/// profile, and `budget_ms` of virtual time for the page's script (fetches included)
/// before the DOM is dumped or the screenshot taken.
fn base(profile: &Path, budget_ms: u64) -> Command {
    let mut cmd = Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .arg(format!("--virtual-time-budget={budget_ms}"));
    cmd
}

/// The page's DOM once its script had `budget_ms` of (virtual) time.
pub fn dump_dom(url: &str, profile: &Path, budget_ms: u64) -> String {
    let out = base(profile, budget_ms)
        .arg("--dump-dom")
        .arg(url)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", chromium().display()));
    assert!(
        out.status.success(),
        "chromium --dump-dom {url} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A `width`x`height` PNG of the page at `path`.
pub fn screenshot(url: &str, profile: &Path, budget_ms: u64, path: &Path, size: (u32, u32)) {
    let out = base(profile, budget_ms)
        .arg(format!("--screenshot={}", path.display()))
        .arg(format!("--window-size={},{}", size.0, size.1))
        .arg(url)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", chromium().display()));
    assert!(
        out.status.success() && path.is_file(),
        "chromium --screenshot of {url} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The text of the element with `id` in a dumped DOM (up to its first child tag).
pub fn text_of(dom: &str, id: &str) -> Option<String> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let rest = &dom[at..];
    let start = rest.find('>')? + 1;
    let end = rest[start..].find('<')? + start;
    Some(rest[start..end].trim().to_owned())
}

/// The value of attribute `attr` of the element whose attribute `key` is `value`.
pub fn attr_where(dom: &str, key: &str, value: &str, attr: &str) -> Option<String> {
    let at = dom.find(&format!("{key}=\"{value}\""))?;
    let tag_start = dom[..at].rfind('<')?;
    let tag_end = at + dom[at..].find('>')?;
    let tag = &dom[tag_start..tag_end];
    let needle = format!("{attr}=\"");
    let v = tag.find(&needle)? + needle.len();
    Some(tag[v..v + tag[v..].find('"')?].to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dom_lookups_find_texts_and_attributes() {
        let dom = r#"<div><span id="n" class="x">12</span><tr data-job="7" data-state="finished"><td>7</td></tr></div>"#;
        assert_eq!(text_of(dom, "n").as_deref(), Some("12"));
        assert_eq!(text_of(dom, "m"), None);
        assert_eq!(
            attr_where(dom, "data-job", "7", "data-state").as_deref(),
            Some("finished")
        );
        assert_eq!(attr_where(dom, "data-job", "8", "data-state"), None);
    }
}
