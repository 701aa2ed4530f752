//! `loadgen report DIR... --out REPORT`: figures (SVG) and one HTML page from runs.

use anyhow::Result;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// Run directories: the --out of `loadgen simulate`, `replay` or `embedded` (a
    /// directory holding tasks.csv, or one whose sub-directories do, as
    /// `simulate --scheduler megha,sparrow` writes). Each run is named after its
    /// directory on the plots.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Where the figures (*.svg) and index.html go (created if missing).
    #[arg(long, value_name = "DIR", default_value = "report")]
    pub out: PathBuf,
}

pub fn run(args: ReportArgs) -> Result<()> {
    let written = crate::plots::report(&args.dirs, &args.out)?;
    for f in &written.figures {
        println!("{}: {}", f.title, f.path.display());
    }
    for s in &written.skipped {
        println!("not drawn: {s}");
    }
    println!("page: {}", written.page.display());
    Ok(())
}
