//! Synthetic trace files for tests and the streaming benchmark, written row by row so
//! that generating a large file takes no memory.

use std::io::{self, Write};

/// What a generator wrote, and what a correct reader should produce from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SynthSummary {
    pub rows: u64,
    pub jobs: u64,
    pub tasks: u64,
    /// Rows a reader must drop (failed instances).
    pub dropped_rows: u64,
}

/// Instances per synthetic Alibaba job: two stages, `M1` then `R2_1`.
pub const ALIBABA_JOB_ROWS: u64 = 10;

/// About `rows` rows of `batch_instance.csv`, grouped by job; every 7th job has one
/// failed instance. Only whole jobs are written.
pub fn write_alibaba_instances<W: Write>(out: &mut W, rows: u64) -> io::Result<SynthSummary> {
    let jobs = (rows / ALIBABA_JOB_ROWS).max(1);
    let mut s = SynthSummary {
        rows: 0,
        jobs,
        tasks: 0,
        dropped_rows: 0,
    };
    for j in 0..jobs {
        let start = j * 3;
        for i in 0..ALIBABA_JOB_ROWS {
            let (task, offset) = if i < ALIBABA_JOB_ROWS / 2 {
                ("M1", 0)
            } else {
                ("R2_1", 20)
            };
            let failed = j % 7 == 0 && i == 0;
            let status = if failed { "Failed" } else { "Terminated" };
            let begin = start + offset;
            let end = begin + 5 + (i * 7 + j) % 13;
            writeln!(
                out,
                "ins_{j}_{i},{task},j_{j},1,{status},{begin},{end},m_{m},1,1,{cpu},{cpu},0.{i}1,0.{i}2",
                m = (i + j) % 100,
                cpu = 50 + (i % 4) * 25,
            )?;
            s.rows += 1;
            if failed {
                s.dropped_rows += 1;
            } else {
                s.tasks += 1;
            }
        }
    }
    Ok(s)
}

/// Instances per synthetic Google job and jobs interleaved per group.
pub const GOOGLE_JOB_INSTANCES: u64 = 4;
pub const GOOGLE_GROUP_JOBS: u64 = 8;

/// About `rows` instance events (CSV with header): groups of 8 jobs whose SUBMIT,
/// SCHEDULE and FINISH events interleave, so that several jobs are open at once.
/// Every instance finishes. Only whole groups are written.
pub fn write_google_events<W: Write>(out: &mut W, rows: u64) -> io::Result<SynthSummary> {
    let per_group = GOOGLE_GROUP_JOBS * GOOGLE_JOB_INSTANCES * 3;
    let groups = (rows / per_group).max(1);
    writeln!(
        out,
        "time,type,collection_id,instance_index,priority,scheduling_class,resource_request.cpus,resource_request.memory,constraint"
    )?;
    let mut time = 600_000_000u64;
    for g in 0..groups {
        for kind in [0u8, 3, 6] {
            for j in 0..GOOGLE_GROUP_JOBS {
                for i in 0..GOOGLE_JOB_INSTANCES {
                    time += 1000 + (i * 37 + j * 11) % 500;
                    let cid = 1000 + g * GOOGLE_GROUP_JOBS + j;
                    let constraint = if kind == 0 && i == 0 {
                        "\"[{\"\"name\"\":\"\"arch\"\",\"\"value\"\":\"\"x86\"\",\"\"relation\"\":\"\"EQUAL\"\"}]\""
                    } else {
                        ""
                    };
                    writeln!(
                        out,
                        "{time},{kind},{cid},{i},200,1,0.0125,0.0063,{constraint}"
                    )?;
                }
            }
        }
    }
    Ok(SynthSummary {
        rows: groups * per_group,
        jobs: groups * GOOGLE_GROUP_JOBS,
        tasks: groups * GOOGLE_GROUP_JOBS * GOOGLE_JOB_INSTANCES,
        dropped_rows: 0,
    })
}
