//! The report's HTML page: a summary table of the runs, then every figure inline
//! (the SVG files' contents), so that the page is one self-contained file.

use super::figures::Figure;
use super::runs::Run;
use super::series;
use anyhow::{Context, Result};
use std::fmt::Write;

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The value at quantile `q` of sorted `v`.
fn quantile(v: &[f64], q: f64) -> Option<f64> {
    let n = v.len();
    (n > 0).then(|| v[((n as f64 * q).ceil() as usize).clamp(1, n) - 1])
}

pub fn render(runs: &[Run], figures: &[Figure], skipped: &[String]) -> Result<String> {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Megha run report</title>\n<style>\
body{{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1d2330;max-width:1000px}}\
table{{border-collapse:collapse;margin:8px 0 20px}}td,th{{padding:4px 10px;border-bottom:1px solid #dde1e8;text-align:right}}\
th:first-child,td:first-child{{text-align:left}}figure{{margin:18px 0}}figcaption{{color:#6b7385;font-size:13px}}\
svg{{max-width:100%;height:auto}}.muted{{color:#6b7385}}</style></head><body>\n<h1>Run report</h1>\n"
    );
    let _ = writeln!(
        h,
        "<table id=\"runs\"><tr><th>run</th><th>directory</th><th>tasks</th><th>started</th><th>mean ms</th><th>p50 ms</th><th>p99 ms</th><th>max ms</th></tr>"
    );
    for r in runs {
        let mut a = series::allocation_ms(r);
        a.sort_by(f64::total_cmp);
        let f = |v: Option<f64>| v.map_or("–".to_owned(), |v| format!("{v:.2}"));
        let mean = (!a.is_empty()).then(|| a.iter().sum::<f64>() / a.len() as f64);
        let _ = writeln!(
            h,
            "<tr data-run=\"{}\"><td>{}</td><td class=\"muted\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&r.label),
            escape(&r.label),
            escape(&r.dir.display().to_string()),
            r.tasks.len(),
            a.len(),
            f(mean),
            f(quantile(&a, 0.5)),
            f(quantile(&a, 0.99)),
            f(a.last().copied()),
        );
    }
    h.push_str("</table>\n<p class=\"muted\">Allocation time = task start - arrival (Megha section III).</p>\n");
    for fig in figures {
        let svg = std::fs::read_to_string(&fig.path)
            .with_context(|| format!("cannot read back {}", fig.path.display()))?;
        let file = fig
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let _ = writeln!(
            h,
            "<figure>{svg}<figcaption>{} (<a href=\"{}\">{}</a>)</figcaption></figure>",
            escape(&fig.title),
            escape(&file),
            escape(&file)
        );
    }
    if !skipped.is_empty() {
        h.push_str("<h2>Not drawn</h2><ul>");
        for s in skipped {
            let _ = write!(h, "<li>{}</li>", escape(s));
        }
        h.push_str("</ul>\n");
    }
    h.push_str("</body></html>\n");
    Ok(h)
}
