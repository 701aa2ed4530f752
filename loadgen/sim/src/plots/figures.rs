//! Drawing the figures as SVG with plotters (its SVG backend writes `<text>` elements
//! and needs no font files: built without plotters' `ttf` feature, nothing links
//! fontconfig or freetype).

use super::runs::Run;
use super::series::{self, COMPONENTS};
use anyhow::{anyhow, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

const SIZE: (u32, u32) = (860, 480);
const FONT: &str = "sans-serif";

/// Colours of successive series (colour-blind friendly, Okabe-Ito).
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(120, 120, 120),
    RGBColor(240, 228, 66),
];

fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

fn plot_err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing failed: {e}")
}

/// One figure written: its file and title.
#[derive(Debug, Clone)]
pub struct Figure {
    pub path: PathBuf,
    pub title: String,
}

/// Allocation-time CDFs of every run overlaid, log time axis (Megha Figure 4 style).
pub fn allocation_cdf(runs: &[Run], out: &Path) -> Result<Option<Figure>> {
    let curves: Vec<(&str, Vec<(f64, f64)>)> = runs
        .iter()
        .map(|r| {
            let pts = series::cdf(&series::allocation_ms(r));
            (r.label.as_str(), pts)
        })
        .filter(|(_, p)| !p.is_empty())
        .collect();
    let axis = Axis {
        // Zero allocation times sit at the left edge of the log axis.
        log_floor: Some(0.01),
        x: "allocation time (ms, log scale)",
        y: "fraction of tasks",
    };
    cdf_figure(
        &curves,
        &out.join("allocation_cdf.svg"),
        "Allocation time CDF",
        axis,
    )
}

/// Job completion time CDFs of every run with a `jobs.csv` overlaid (Carbyne's
/// Figure 5 style), linear seconds.
pub fn jct_cdf(runs: &[Run], out: &Path) -> Result<Option<Figure>> {
    let curves: Vec<(&str, Vec<(f64, f64)>)> = runs
        .iter()
        .map(|r| (r.label.as_str(), series::cdf(&r.jct_s)))
        .filter(|(_, p)| !p.is_empty())
        .collect();
    let axis = Axis {
        log_floor: None,
        x: "job completion time (s)",
        y: "fraction of jobs",
    };
    cdf_figure(
        &curves,
        &out.join("jct_cdf.svg"),
        "Job completion time CDF",
        axis,
    )
}

/// A CDF figure's x axis (log from `log_floor`, else linear from 0) and labels.
struct Axis<'a> {
    log_floor: Option<f64>,
    x: &'a str,
    y: &'a str,
}

/// `curves` overlaid in `path`; `None` when there is none.
fn cdf_figure(
    curves: &[(&str, Vec<(f64, f64)>)],
    path: &Path,
    title: &str,
    axis: Axis<'_>,
) -> Result<Option<Figure>> {
    if curves.is_empty() {
        return Ok(None);
    }
    let floor = axis.log_floor.unwrap_or(0.0);
    let hi = curves
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.0))
        .fold(floor * 10.0, f64::max)
        .max(1e-9)
        * 1.2;
    {
        let root = canvas(path)?;
        let b = builder(&root, title, 56);
        macro_rules! draw {
            ($chart:expr) => {{
                let mut chart = $chart;
                chart
                    .configure_mesh()
                    .label_style((FONT, 14))
                    .axis_desc_style((FONT, 15))
                    .x_label_formatter(&|x: &f64| number(*x))
                    .x_desc(axis.x)
                    .y_desc(axis.y)
                    .draw()
                    .map_err(plot_err)?;
                for (i, (name, pts)) in curves.iter().enumerate() {
                    let pts = pts.iter().map(|(x, y)| (x.max(floor), *y));
                    solid(&mut chart, pts, color(i), *name)?;
                }
                legend(&mut chart, SeriesLabelPosition::LowerRight)?;
            }};
        }
        let mut b = b;
        match axis.log_floor {
            Some(f) => draw!(b
                .build_cartesian_2d((f..hi).log_scale(), 0f64..1.0)
                .map_err(plot_err)?),
            None => draw!(b
                .build_cartesian_2d(0f64..hi, 0f64..1.0)
                .map_err(plot_err)?),
        }
        root.present().map_err(plot_err)?;
    }
    Ok(Some(Figure {
        path: path.to_owned(),
        title: title.to_owned(),
    }))
}

/// A white canvas of [`SIZE`] writing to `path`.
fn canvas(path: &Path) -> Result<DrawingArea<SVGBackend<'_>, Shift>> {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    Ok(root)
}

/// A chart with the common caption, margins and label areas (`y_area` wide).
fn builder<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    title: &str,
    y_area: u32,
) -> ChartBuilder<'a, 'a, SVGBackend<'b>> {
    let mut b = ChartBuilder::on(root);
    b.caption(title, (FONT, 22))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(y_area);
    b
}

/// A solid line of colour `c`, in the legend as `label`.
fn solid<X, Y>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<X, Y>>,
    pts: impl IntoIterator<Item = (f64, f64)>,
    c: RGBColor,
    label: impl Into<String>,
) -> Result<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    chart
        .draw_series(LineSeries::new(pts, c.stroke_width(2)))
        .map_err(plot_err)?
        .label(label)
        .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], c.stroke_width(2)));
    Ok(())
}

/// A thin dashed line of colour `c`, in the legend as `label` if given.
fn dashed<X, Y, P>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<X, Y>>,
    pts: P,
    c: RGBColor,
    label: Option<String>,
) -> Result<()>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
    P: IntoIterator<Item = (f64, f64)>,
    P::IntoIter: Clone,
{
    let drawn = chart
        .draw_series(DashedLineSeries::new(pts, 6, 4, c.stroke_width(1)))
        .map_err(plot_err)?;
    if let Some(label) = label {
        drawn
            .label(label)
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 6, y)], c.stroke_width(1)));
    }
    Ok(())
}

fn legend<'a, DB: DrawingBackend + 'a, X: Ranged, Y: Ranged>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    at: SeriesLabelPosition,
) -> Result<()> {
    chart
        .configure_series_labels()
        .position(at)
        .label_font((FONT, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()
        .map_err(|e| anyhow!("drawing the legend failed: {e:?}"))
}

/// Mean of the four allocation-time components per run, grouped bars (Megha
/// Figure 7).
pub fn delay_breakdown(runs: &[Run], out: &Path) -> Result<Option<Figure>> {
    let means: Vec<(&str, [f64; 4])> = runs
        .iter()
        .filter_map(|r| Some((r.label.as_str(), series::component_means_ms(r)?)))
        .collect();
    if means.is_empty() {
        return Ok(None);
    }
    // A log axis: the components differ by orders of magnitude.
    let floor = 0.001;
    let top = means
        .iter()
        .flat_map(|(_, m)| m.iter().copied())
        .fold(floor * 10.0, f64::max)
        * 300.0;
    let path = out.join("delay_breakdown.svg");
    let title = "Allocation time breakdown (mean per task)".to_owned();
    {
        let root = canvas(&path)?;
        let n = means.len();
        let labels: Vec<String> = means.iter().map(|(l, _)| l.to_string()).collect();
        let mut chart = builder(&root, &title, 64)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), (floor..top).log_scale())
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .disable_x_mesh()
            .x_labels(n.max(2) * 2 + 1)
            .x_label_formatter(&|x: &f64| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < labels.len() {
                    labels[i as usize].clone()
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|y: &f64| number(*y))
            .y_desc("mean delay (ms, log scale)")
            .draw()
            .map_err(plot_err)?;
        let width = 0.8 / 4.0;
        for (k, component) in COMPONENTS.iter().enumerate() {
            let c = color(k);
            let bars = means.iter().enumerate().map(|(i, (_, m))| {
                let x0 = i as f64 - 0.4 + k as f64 * width;
                Rectangle::new(
                    [(x0, floor), (x0 + width * 0.92, m[k].max(floor))],
                    c.filled(),
                )
            });
            chart
                .draw_series(bars)
                .map_err(plot_err)?
                .label(*component)
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled()));
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        root.present().map_err(plot_err)?;
    }
    Ok(Some(Figure { path, title }))
}

/// (time s, running, demand) per node.
type Load = (f64, f64, f64);

/// Tasks running (solid) and demand (dashed: arrived, not finished) per node over
/// time, every run overlaid (Megha Figure 5). Without `summary.json` the counts are
/// not divided by the number of nodes.
pub fn utilisation(runs: &[Run], out: &Path) -> Result<Option<Figure>> {
    let series: Vec<(&str, Vec<Load>)> = runs
        .iter()
        .map(|r| {
            let per = r.nodes().filter(|n| *n > 0.0).unwrap_or(1.0);
            let load = series::load_over_time(r, 400)
                .into_iter()
                .map(|(t, run, dem)| (t, run / per, dem / per))
                .collect();
            (r.label.as_str(), load)
        })
        .filter(|(_, l): &(_, Vec<_>)| !l.is_empty())
        .collect();
    if series.is_empty() {
        return Ok(None);
    }
    let per_node = runs
        .iter()
        .filter(|r| !r.tasks.is_empty())
        .all(|r| r.nodes().is_some());
    let t_hi = series
        .iter()
        .flat_map(|(_, l)| l.iter().map(|p| p.0))
        .fold(1e-3, f64::max);
    let t_lo = series
        .iter()
        .flat_map(|(_, l)| l.iter().map(|p| p.0))
        .fold(f64::INFINITY, f64::min)
        .min(t_hi - 1e-3);
    let y_hi = series
        .iter()
        .flat_map(|(_, l)| l.iter().map(|p| p.1.max(p.2)))
        .fold(1e-3, f64::max)
        * 1.1;
    let path = out.join("utilisation.svg");
    let title = "Utilisation and demand over time".to_owned();
    {
        let root = canvas(&path)?;
        let mut chart = builder(&root, &title, 64)
            .build_cartesian_2d(t_lo..t_hi, 0f64..y_hi)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .x_desc("time (s)")
            .y_desc(if per_node { "tasks per node" } else { "tasks" })
            .draw()
            .map_err(plot_err)?;
        for (i, (name, load)) in series.iter().enumerate() {
            let c = color(i);
            solid(
                &mut chart,
                load.iter().map(|p| (p.0, p.1)),
                c,
                format!("{name}: running"),
            )?;
            dashed(
                &mut chart,
                load.iter().map(|p| (p.0, p.2)),
                c,
                Some(format!("{name}: demand")),
            )?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        root.present().map_err(plot_err)?;
    }
    Ok(Some(Figure { path, title }))
}

/// Per run with queues: each queue's used share per window (solid) against its
/// entitled share (dashed) (Megha Figure 10).
pub fn shares(run: &Run, out: &Path) -> Result<Option<Figure>> {
    let queues = series::shares_by_queue(&run.shares);
    if queues.is_empty() {
        return Ok(None);
    }
    let t_hi = run
        .shares
        .iter()
        .map(|r| r.window_start_s)
        .fold(1e-3, f64::max);
    let y_hi = run
        .shares
        .iter()
        .map(|r| r.used.max(r.entitled))
        .fold(0.05, f64::max)
        * 1.15;
    let path = out.join(format!("shares_{}.svg", file_safe(&run.label)));
    let title = format!("Queue shares over time: {}", run.label);
    {
        let root = canvas(&path)?;
        let mut chart = builder(&root, &title, 64)
            .build_cartesian_2d(0f64..t_hi, 0f64..y_hi)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .x_desc("window start (s)")
            .y_desc("share of the cluster")
            .draw()
            .map_err(plot_err)?;
        for (i, (queue, (entitled, pts))) in queues.iter().enumerate() {
            let c = color(i);
            solid(
                &mut chart,
                pts.iter().copied(),
                c,
                format!("{queue} (entitled {:.0}%)", entitled * 100.0),
            )?;
            dashed(&mut chart, [(0.0, *entitled), (t_hi, *entitled)], c, None)?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
        root.present().map_err(plot_err)?;
    }
    Ok(Some(Figure { path, title }))
}

/// Jain's fairness index per window, every run with queues overlaid (Megha
/// Figure 11).
pub fn jain(runs: &[Run], out: &Path) -> Result<Option<Figure>> {
    let curves: Vec<(&str, Vec<(f64, f64)>)> = runs
        .iter()
        .map(|r| (r.label.as_str(), series::jain_over_time(&r.shares)))
        .filter(|(_, p)| !p.is_empty())
        .collect();
    if curves.is_empty() {
        return Ok(None);
    }
    let t_hi = curves
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.0))
        .fold(1e-3, f64::max);
    let path = out.join("jain.svg");
    let title = "Jain's fairness index over time".to_owned();
    {
        let root = canvas(&path)?;
        let mut chart = builder(&root, &title, 56)
            .build_cartesian_2d(0f64..t_hi, 0f64..1.05)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .x_desc("window start (s)")
            .y_desc("Jain's index")
            .draw()
            .map_err(plot_err)?;
        for (i, (name, pts)) in curves.iter().enumerate() {
            let c = color(i);
            solid(&mut chart, pts.iter().copied(), c, *name)?;
        }
        legend(&mut chart, SeriesLabelPosition::LowerRight)?;
        root.present().map_err(plot_err)?;
    }
    Ok(Some(Figure { path, title }))
}

/// (utilisation %, violations %, fragmentation %).
type Quality = (f64, f64, f64);

/// LRA placement quality against cluster utilisation, one line per (run, placer):
/// constraint violations (solid) and fragmentation (dashed), in % (MEDEA 7.4).
pub fn lra_quality(runs: &[Run], out: &Path) -> Result<Option<Figure>> {
    let mut lines: Vec<(String, Vec<Quality>)> = Vec::new();
    for r in runs {
        let mut placers: Vec<&str> = r.lra.iter().map(|l| l.placer.as_str()).collect();
        placers.dedup();
        for p in placers {
            let mut pts: Vec<Quality> = r
                .lra
                .iter()
                .filter(|l| l.placer == p)
                .map(|l| (l.utilisation_pct, l.violation_pct, l.fragmentation_pct))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let name = if runs.iter().filter(|r| !r.lra.is_empty()).count() > 1 {
                format!("{} {p}", r.label)
            } else {
                p.to_owned()
            };
            lines.push((name, pts));
        }
    }
    if lines.is_empty() {
        return Ok(None);
    }
    let y_hi = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|x| x.1.max(x.2)))
        .fold(1.0, f64::max)
        * 1.15;
    let path = out.join("lra_quality.svg");
    let title = "LRA constraint violations and fragmentation".to_owned();
    {
        let root = canvas(&path)?;
        let mut chart = builder(&root, &title, 56)
            .build_cartesian_2d(0f64..100.0, 0f64..y_hi)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .x_desc("cluster memory utilisation (%)")
            .y_desc("% (solid: violations, dashed: fragmentation)")
            .draw()
            .map_err(plot_err)?;
        for (i, (name, pts)) in lines.iter().enumerate() {
            let c = color(i);
            solid(
                &mut chart,
                pts.iter().map(|p| (p.0, p.1)),
                c,
                format!("{name}: violations"),
            )?;
            let frag = pts.iter().map(|p| (p.0, p.2));
            dashed(&mut chart, frag, c, Some(format!("{name}: fragmentation")))?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
        root.present().map_err(plot_err)?;
    }
    Ok(Some(Figure { path, title }))
}

/// A tick label: no trailing zeros (`0.01`, `10`, `10000`).
fn number(x: f64) -> String {
    if x >= 1.0 {
        format!("{x:.0}")
    } else {
        let s = format!("{x:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// `label` with everything but letters, digits, `-` and `_` replaced by `_`.
pub fn file_safe(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
