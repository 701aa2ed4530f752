//! What a run used, read from its cgroup ([`UsageProbe`]): CPU time from
//! `cpuacct.usage` (v1, nanoseconds) or `cpu.stat`'s `usage_usec` (v2), less what
//! the cgroup had counted before the run (a kept cgroup counts on from its earlier
//! runs); peak memory from `memory.max_usage_in_bytes` (v1: reset when the run's
//! limits are written) or `memory.peak` (v2: only for a cgroup made for this run,
//! as another process cannot reset it).

use common::messages::RunUsage;
use std::path::{Path, PathBuf};

/// Where a run's usage is read, and the CPU time its cgroup had counted before it.
#[derive(Debug, Default)]
pub struct UsageProbe {
    cpu: Option<CpuCounter>,
    base_us: u64,
    peak: Option<PathBuf>,
}

#[derive(Debug)]
enum CpuCounter {
    /// v1 `cpuacct.usage`: nanoseconds.
    V1(PathBuf),
    /// v2 `cpu.stat`: the `usage_usec` line.
    V2(PathBuf),
}

impl CpuCounter {
    fn read_us(&self) -> Option<u64> {
        match self {
            CpuCounter::V1(f) => Some(read_number(f)? / 1000),
            CpuCounter::V2(f) => std::fs::read_to_string(f)
                .ok()?
                .lines()
                .find_map(|l| l.strip_prefix("usage_usec "))
                .and_then(|n| n.trim().parse().ok()),
        }
    }
}

impl UsageProbe {
    /// A v1 run: its cpu directory (`cpuacct.usage` there when cpuacct shares the
    /// hierarchy) and its memory directory (the peak reset with its limits).
    pub fn v1(cpu_dir: Option<&Path>, memory_dir: Option<&Path>) -> UsageProbe {
        let cpu = cpu_dir.map(|d| CpuCounter::V1(d.join("cpuacct.usage")));
        UsageProbe::new(cpu, memory_dir.map(|d| d.join("memory.max_usage_in_bytes")))
    }

    /// A v2 run in `dir`; its peak only when `fresh` (the cgroup is made for it).
    pub fn v2(dir: &Path, fresh: bool) -> UsageProbe {
        let peak = fresh.then(|| dir.join("memory.peak"));
        UsageProbe::new(Some(CpuCounter::V2(dir.join("cpu.stat"))), peak)
    }

    fn new(cpu: Option<CpuCounter>, peak: Option<PathBuf>) -> UsageProbe {
        // A cgroup not made yet counts from 0.
        let base_us = cpu.as_ref().and_then(CpuCounter::read_us).unwrap_or(0);
        UsageProbe { cpu, base_us, peak }
    }

    /// What the run used (after it ended, before its cgroup goes); `None` when
    /// the CPU time cannot be read (no cgroups, no cpuacct).
    pub fn read(&self) -> Option<RunUsage> {
        let cpu_us = self.cpu.as_ref()?.read_us()?.saturating_sub(self.base_us);
        let memory_peak_mb = (self.peak.as_deref())
            .and_then(read_number)
            .map(|bytes| bytes.div_ceil(1 << 20));
        Some(RunUsage {
            cpu_us,
            memory_peak_mb,
        })
    }
}

fn read_number(file: &Path) -> Option<u64> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_is_what_the_counters_gained_during_the_run() {
        let dir = std::env::temp_dir().join(format!("megha-usage-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        // A kept v1 cgroup: 5 ms counted before the run.
        std::fs::write(dir.join("cpuacct.usage"), "5000000\n").expect("write");
        let probe = UsageProbe::v1(Some(&dir), Some(&dir));
        std::fs::write(dir.join("cpuacct.usage"), "12500000\n").expect("write");
        std::fs::write(dir.join("memory.max_usage_in_bytes"), "3145729\n").expect("write");
        assert_eq!(
            probe.read(),
            Some(RunUsage {
                cpu_us: 7500,
                memory_peak_mb: Some(4)
            })
        );
        // v2: a reused cgroup has no peak of its own.
        std::fs::write(dir.join("cpu.stat"), "usage_usec 100\nuser_usec 60\n").expect("write");
        let probe = UsageProbe::v2(&dir, false);
        std::fs::write(dir.join("cpu.stat"), "usage_usec 350\nuser_usec 60\n").expect("write");
        assert_eq!(
            probe.read(),
            Some(RunUsage {
                cpu_us: 250,
                memory_peak_mb: None
            })
        );
        // Nothing to read: unknown.
        assert_eq!(UsageProbe::default().read(), None);
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
