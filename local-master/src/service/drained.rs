//! Which nodes an operator drained, kept in the LM's data dir (`<data-dir>/drained`,
//! one node number per line) so that a restarted LM keeps them out of service. An
//! LM without a data dir keeps drains for its life only (docs/cli.md says so).

use anyhow::{Context, Result};
use common::NodeId;
use std::path::Path;

const FILE: &str = "drained";

/// The drained nodes written in `dir` (none when there is no file). A line that is
/// not a node number is an error naming the file: the LM does not start on a state
/// it cannot read.
pub fn read(dir: &Path) -> Result<Vec<NodeId>> {
    let path = dir.join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| {
            l.parse::<u32>().map(NodeId).with_context(|| {
                format!(
                    "{}: {l:?} is not a node number; fix or remove the file",
                    path.display()
                )
            })
        })
        .collect()
}

/// Writes `nodes` as the drained ones, durably, before the drain is answered.
pub fn write(dir: &Path, nodes: &[NodeId]) -> Result<()> {
    super::life::create_private_dir(dir)?;
    let text: String = nodes.iter().map(|n| format!("{}\n", n.0)).collect();
    super::life::write_durably(dir, FILE, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drains_are_read_back_and_a_bad_file_names_itself() {
        let dir = std::env::temp_dir().join(format!("megha-lm-drained-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(read(&dir).unwrap(), Vec::new(), "no file: none drained");
        write(&dir, &[NodeId(3), NodeId(0)]).unwrap();
        assert_eq!(read(&dir).unwrap(), vec![NodeId(3), NodeId(0)]);
        write(&dir, &[]).unwrap();
        assert_eq!(read(&dir).unwrap(), Vec::new());
        std::fs::write(dir.join(FILE), "1\nnode-two\n").unwrap();
        let e = read(&dir).unwrap_err().to_string();
        assert!(e.contains("drained") && e.contains("node-two"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
