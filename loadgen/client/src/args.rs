//! The command line: [`Cli`], its [`Command`]s and their flags (clap), with the
//! exit statuses they document. Parsing only; `lib.rs` runs the commands.

use clap::{Parser, Subcommand};
use std::path::PathBuf;

use crate::flags::{after_job, key_value, positive_seconds};
use crate::{logs, wait};

#[derive(Debug, Parser)]
#[command(
    name = "megha",
    version,
    about = "Command-line client of a Megha cluster: submit jobs, follow them, cancel them, read their output, see the nodes.",
    long_about = "Command-line client of a Megha cluster. It talks to one global master (GM) over its \
public HTTP API: --gm URL, or the MEGHA_GM environment variable (default http://127.0.0.1:8080). \
A GM with a standby has two addresses, --gm 'URL|URL': the first that serves answers.",
    after_help = "Examples:
  megha run -- sh -c 'echo hello'             one task running a command
  megha run --count 4 --max-attempts 3 -- ./train.sh
  megha run job.json                          a job file (the POST /v1/jobs body; .toml too)
  megha run --wait -- make test               submit, wait, exit with the job's outcome
  megha wait 281474976710657                  exit 0, the task's exit code, 130 cancelled...
  megha status --state active                 the GM's jobs
  megha status 281474976710657                one job and its tasks
  megha pending                               queued tasks and why each waits
  megha logs 281474976710657 0 --follow       a task's output as it grows
  megha cancel 281474976710657
  megha nodes                                 nodes; down, drained, LMs not ready marked
  megha node drain lm0/node3                  no new work there (admin); undrain: back
  megha usage --user alice --since 7d         runs, CPU and memory reserved per queue
  megha top                                   a live summary (Ctrl-C to quit); --once for scripts"
)]
pub struct Cli {
    /// The global master's base URL; `URL|URL` for a GM and its standby (the
    /// first that serves answers).
    #[arg(
        long,
        env = "MEGHA_GM",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    pub gm: String,
    /// File holding your API token (or the token itself in MEGHA_TOKEN); see the
    /// README's "Security".
    #[arg(long, env = "MEGHA_TOKEN_FILE", value_name = "FILE", global = true)]
    pub token_file: Option<PathBuf>,
    /// A CA (PEM) to trust for an https:// GM, besides the system roots.
    #[arg(long, env = "MEGHA_TLS_CA_FILE", value_name = "FILE", global = true)]
    pub tls_ca_file: Option<PathBuf>,
    /// Print the GM's JSON answers instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Submit a job: a job file (JSON or TOML, the body of POST /v1/jobs), or a
    /// command after `--` run by `--count` tasks.
    #[command(visible_alias = "submit", after_help = EXIT_CODES)]
    Run {
        /// A job file (.json or .toml). Leave out to give a command after `--`.
        file: Option<PathBuf>,
        /// Tasks running the command.
        #[arg(long, default_value_t = 1)]
        count: usize,
        /// CPU per task, in thousandths of a core.
        #[arg(long, default_value_t = 1000)]
        cpu_millis: u64,
        /// Memory per task, in MiB.
        #[arg(long, default_value_t = 256)]
        memory_mb: u64,
        /// The user queue (when the cluster has queues).
        #[arg(long)]
        queue: Option<String>,
        /// Runs of a failed task at most, the first included (1: no retry).
        #[arg(long)]
        max_attempts: Option<u32>,
        /// Submit as this user (an admin only). Left out, the GM records the
        /// token's user (with no tokens file: no user).
        #[arg(long)]
        user: Option<String>,
        /// The tasks' working directory (at the worker); a relative path is taken
        /// from the current directory. Left out: a fresh directory of the task's own.
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        /// A variable of the tasks' environment (repeatable); see docs/cli.md for
        /// the MEGHA_* variables every task gets.
        #[arg(long = "env", value_name = "K=V", value_parser = key_value)]
        env: Vec<(String, String)>,
        /// The job's name (1 to 128 bytes; names need not be unique).
        #[arg(long)]
        name: Option<String>,
        /// A label of the job (repeatable): `megha status --label K=V` finds it.
        #[arg(long = "label", value_name = "K=V", value_parser = key_value)]
        labels: Vec<(String, String)>,
        /// Run after job JOB (repeatable): `JOB` or `JOB:ok` once it finished,
        /// `JOB:any` once it ended, `JOB:failed` once it failed or was cancelled
        /// (Slurm's afterok, afterany, afternotok); a job of any GM. When JOB
        /// ends otherwise, this job fails without running.
        #[arg(long = "after", value_name = "JOB[:WHEN]", value_parser = after_job)]
        after: Vec<(u64, String)>,
        /// Wait for the job to end and exit with its outcome (as `megha wait`).
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        wait_options: WaitArgs,
        /// The command and its arguments.
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// Submit JOB again, as a new job: the spec it was submitted with
    /// (GET /v1/jobs/{id}/spec), e.g. after it failed.
    #[command(after_help = EXIT_CODES)]
    Resubmit {
        job: u64,
        /// Wait for the new job to end and exit with its outcome (as `megha wait`).
        #[arg(long)]
        wait: bool,
        #[command(flatten)]
        wait_options: WaitArgs,
    },
    /// A whole cluster on this machine for trying things, until Ctrl-C: runs
    /// `loadgen dev` (next to this program, or on PATH) with these arguments
    /// (`megha dev -- --help` lists them); then `megha run --wait -- echo hello`.
    Dev {
        /// Arguments for `loadgen dev` (e.g. `-- --nodes 4`).
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// One job in full: its state, its spec as submitted, each task's timeline
    /// (submitted, launched where, started, failed runs, ended how) and its
    /// failures (the first 100 tasks).
    Describe { job: u64 },
    /// Wait until every JOB ended; exit with their outcome (the first JOB, in the
    /// order given, that did not finish decides).
    #[command(after_help = EXIT_CODES)]
    Wait {
        #[arg(required = true)]
        jobs: Vec<u64>,
        #[command(flatten)]
        wait_options: WaitArgs,
    },
    /// The GM's jobs, newest first (--oldest: oldest first); with a JOB id, that
    /// job and its tasks (the first 100: state, run, where, why).
    #[command(visible_alias = "jobs", after_help = EXIT_CODES)]
    Status {
        /// One job's id (leave out to list jobs).
        job: Option<u64>,
        /// Only jobs in this state: active, finished, failed or cancelled.
        #[arg(long)]
        state: Option<String>,
        #[arg(long)]
        queue: Option<String>,
        #[arg(long)]
        user: Option<String>,
        /// Jobs per page (at most 1000).
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// The page after this job id (the `next` of the previous page).
        #[arg(long)]
        after: Option<u64>,
        /// Oldest jobs first.
        #[arg(long)]
        oldest: bool,
        /// Only jobs of this name.
        #[arg(long)]
        name: Option<String>,
        /// Only jobs with this label.
        #[arg(long, value_name = "K=V")]
        label: Option<String>,
        /// With a JOB: exit with its outcome, as `megha wait` would, without
        /// waiting (124 while it has not ended).
        #[arg(long, requires = "job")]
        exit_code: bool,
        /// Every GM's jobs (the default: the GM asks the others and merges their
        /// lists), or `--all-gms=false` for the jobs of the GM at --gm only.
        #[arg(long, default_value_t = true, action = clap::ArgAction::Set, value_name = "BOOL")]
        all_gms: bool,
    },
    /// One job, with its tasks (the same as `status JOB`).
    #[command(hide = true)]
    Job { id: u64 },
    /// Queued tasks, longest waiting first, and why each is not running.
    Pending {
        /// Tasks to show (at most 10,000); the total is always given.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// A live summary: per queue running, starting and pending tasks; per LM its
    /// nodes idle, busy and full; the newest jobs. Refreshes until Ctrl-C.
    Top {
        /// Seconds between refreshes.
        #[arg(long, default_value_t = 2.0, value_parser = positive_seconds)]
        interval: f64,
        /// Print once and exit (for scripts and tests).
        #[arg(long)]
        once: bool,
        /// How many of the newest jobs to list.
        #[arg(long, default_value_t = 10)]
        jobs: usize,
        /// An LM state older than this (milliseconds) is shown `stale`.
        #[arg(long, default_value_t = 30_000)]
        stale_ms: u64,
    },
    /// Cancel a job: its queued tasks leave the queues, its running ones are killed.
    Cancel { id: u64 },
    /// A task's output (stdout unless --stderr).
    Logs(logs::Which),
    /// The nodes as the GM sees them (per local master and partition), each marked
    /// down, drained, or on an LM that is not ready, as the LMs' own lists say.
    Nodes {
        /// Totals per partition only.
        #[arg(long)]
        summary: bool,
    },
    /// Take a node out of service and back (an admin only).
    Node {
        #[command(subcommand)]
        action: NodeAction,
    },
    /// Runs, wall time and CPU and memory reserved (x run time), per user and queue
    /// (yours only, unless you are an admin).
    Usage {
        /// One user's (an admin may name anyone; others only themselves).
        #[arg(long)]
        user: Option<String>,
        #[arg(long)]
        queue: Option<String>,
        /// From: Unix seconds, or a time ago (90m, 12h, 7d, 2w). Left out: all kept.
        #[arg(long)]
        since: Option<String>,
        /// Until (the same forms). Left out: now.
        #[arg(long)]
        until: Option<String>,
    },
}

/// `megha node ...`.
#[derive(Debug, Subcommand)]
pub enum NodeAction {
    /// No new work lands on NODE (LM/NODE, like lm0/node3); what runs there
    /// finishes (like `scontrol update state=drain`, `nomad node drain`).
    Drain { node: String },
    /// NODE takes work again.
    Undrain { node: String },
}

/// The exit statuses of `wait`, `run --wait` and `status --exit-code` (as
/// docs/cli.md; the values are [`outcome`]'s).
const EXIT_CODES: &str = "Exit status (of wait, run --wait, status JOB --exit-code; docs/cli.md):
  0        every task finished
  1-255    the exit code of the job's first failed task (lowest index), when it exited
  128+N    that task was killed by signal N (137: SIGKILL, out-of-memory kills too)
  125      that task failed without an exit code: lost, could not start, unplaceable
  130      the job was cancelled
  124      not ended yet (status --exit-code), or --timeout ran out
  127      unknown job: never submitted to this GM, another user's, or forgotten
  1        megha's own error (GM unreachable past --give-up-after, refused call)
  2        bad arguments
A task's own exit code can equal one of these; --json tells them apart.";

/// How `wait` and `run --wait` poll.
#[derive(Debug, Clone, clap::Args)]
pub struct WaitArgs {
    /// The longest delay between two polls of a job, in seconds.
    #[arg(long = "poll-interval", default_value_t = 2.0, value_parser = positive_seconds)]
    poll_interval: f64,
    /// Stop waiting after this many seconds (exit 124).
    #[arg(long, value_parser = positive_seconds)]
    timeout: Option<f64>,
    /// Give up (exit 1) when the GM did not answer for this many seconds in a row.
    #[arg(long, default_value_t = 60.0, value_parser = positive_seconds)]
    give_up_after: f64,
}

impl WaitArgs {
    pub(crate) fn options(&self) -> wait::WaitOptions {
        wait::WaitOptions {
            interval: std::time::Duration::from_secs_f64(self.poll_interval),
            timeout: self.timeout.map(std::time::Duration::from_secs_f64),
            give_up_after: std::time::Duration::from_secs_f64(self.give_up_after),
        }
    }
}
