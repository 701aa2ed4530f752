//! Fault schedules: the faults of one run as timed events, drawn from rates (seeded)
//! or read from a small script, so that a history the search found becomes a
//! regression case.
//!
//! Script format, one fault per line (`#` starts a comment, times in milliseconds of
//! simulated time):
//!
//! ```text
//! 0     rates loss=0.05 dup=0.02 delay=0.1 reorder=0.1
//! 1000  crash gm0
//! 3000  restart gm0
//! 2000  partition gm0,gm1 | lm0
//! 4000  heal
//! 500   refuse w3
//! 900   accept w3
//! 600   broker down
//! 700   broker up
//! 100   skew lm1 -5000
//! 8000  rates off
//! 9000  rates link=state loss=0.5   # one kind of link: gm-lm, lm-worker or state
//! ```
//!
//! Roles are `gmN`, `lmN` and `wN` (workers numbered across the cluster). A skew (in
//! milliseconds, signed) takes effect at the role's next start (a clock is read when a
//! role starts: the GM's first batch number, the LM's snapshot versions).

use common::rng::{seeded, Rng, SeededRng};
use common::Micros;
use std::fmt;

/// The seeded stream of random schedules (the simulator's other streams are in
/// [`common::rng::streams`]; this one is private to the fault harness).
pub const SCHEDULE_STREAM: u64 = 0xFA17;

/// A role of the simulated cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    Gm(u16),
    Lm(u16),
    Worker(u32),
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Role::Gm(g) => write!(f, "gm{g}"),
            Role::Lm(l) => write!(f, "lm{l}"),
            Role::Worker(w) => write!(f, "w{w}"),
        }
    }
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("role `{s}`: expected gmN, lmN or wN");
        let (kind, n) = if let Some(n) = s.strip_prefix("gm") {
            ("gm", n)
        } else if let Some(n) = s.strip_prefix("lm") {
            ("lm", n)
        } else if let Some(n) = s.strip_prefix('w') {
            ("w", n)
        } else {
            return Err(bad());
        };
        let n: u32 = n.parse().map_err(|_| bad())?;
        Ok(match kind {
            "gm" => Role::Gm(u16::try_from(n).map_err(|_| bad())?),
            "lm" => Role::Lm(u16::try_from(n).map_err(|_| bad())?),
            _ => Role::Worker(n),
        })
    }
}

/// A kind of link, for per-message faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Link {
    /// GM -> LM calls and their answers, LM -> GM ends and requeues.
    GmLm,
    /// LM -> worker orders, worker -> LM reports and registrations.
    LmWorker,
    /// State updates (heartbeats) over the broker.
    State,
}

impl Link {
    pub const ALL: [Link; 3] = [Link::GmLm, Link::LmWorker, Link::State];

    pub fn name(&self) -> &'static str {
        match self {
            Link::GmLm => "gm-lm",
            Link::LmWorker => "lm-worker",
            Link::State => "state",
        }
    }
}

/// Per-message fault probabilities, applied to every message sent while they are on.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LinkRates {
    /// A message is lost (on a retrying stream: the send fails and is retried later).
    pub loss: f64,
    /// A message arrives twice (a resend whose first copy did arrive).
    pub dup: f64,
    /// A message takes extra time (up to [`super::FaultConfig::max_extra_delay`]).
    pub delay: f64,
    /// A message on a link without ordering overtakes or is overtaken (a random extra
    /// delay up to ten network delays); ordered streams keep their order.
    pub reorder: f64,
}

impl LinkRates {
    pub fn is_off(&self) -> bool {
        *self == LinkRates::default()
    }
}

/// One scheduled fault.
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    Crash(Role),
    Restart(Role),
    /// Cut every link between a role of one set and a role of the other.
    Partition(Vec<Role>, Vec<Role>),
    /// Every partition heals.
    Heal,
    /// The worker answers every start order with a refusal (reported failed).
    Refuse(u32),
    Accept(u32),
    /// State updates (heartbeats over the broker) are lost while it is down.
    BrokerDown,
    BrokerUp,
    /// The role's clock reads `ms` milliseconds off from its next start on.
    Skew(Role, i64),
    /// Per-message faults from now on, on one kind of link or (`None`) on all.
    Rates(Option<Link>, LinkRates),
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |roles: &[Role]| {
            roles
                .iter()
                .map(Role::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        match self {
            Fault::Crash(r) => write!(f, "crash {r}"),
            Fault::Restart(r) => write!(f, "restart {r}"),
            Fault::Partition(a, b) => write!(f, "partition {} | {}", set(a), set(b)),
            Fault::Heal => write!(f, "heal"),
            Fault::Refuse(w) => write!(f, "refuse w{w}"),
            Fault::Accept(w) => write!(f, "accept w{w}"),
            Fault::BrokerDown => write!(f, "broker down"),
            Fault::BrokerUp => write!(f, "broker up"),
            Fault::Skew(r, ms) => write!(f, "skew {r} {ms}"),
            Fault::Rates(link, r) => {
                f.write_str("rates")?;
                if let Some(link) = link {
                    write!(f, " link={}", link.name())?;
                }
                match r.is_off() {
                    true => f.write_str(" off"),
                    false => write!(
                        f,
                        " loss={} dup={} delay={} reorder={}",
                        r.loss, r.dup, r.delay, r.reorder
                    ),
                }
            }
        }
    }
}

/// Faults at times, in time order (ties keep the script's order).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Schedule {
    pub faults: Vec<(Micros, Fault)>,
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (at, fault) in &self.faults {
            match at.0 % 1000 {
                0 => writeln!(f, "{} {fault}", at.0 / 1000)?,
                us => writeln!(f, "{}.{us:03} {fault}", at.0 / 1000)?,
            }
        }
        Ok(())
    }
}

impl Schedule {
    /// Refuses a schedule naming a role the cluster does not have.
    pub fn check_roles(&self, roles: Roles) -> Result<(), String> {
        let exists = |r: &Role| match *r {
            Role::Gm(g) => g < roles.gms,
            Role::Lm(l) => l < roles.lms,
            Role::Worker(w) => w < roles.workers,
        };
        for (at, fault) in &self.faults {
            let named: Vec<Role> = match fault {
                Fault::Crash(r) | Fault::Restart(r) | Fault::Skew(r, _) => vec![*r],
                Fault::Refuse(w) | Fault::Accept(w) => vec![Role::Worker(*w)],
                Fault::Partition(a, b) => a.iter().chain(b).copied().collect(),
                _ => Vec::new(),
            };
            if let Some(r) = named.iter().find(|r| !exists(r)) {
                return Err(format!(
                    "fault `{fault}` at {} ms: {r} does not exist in a cluster of {} GMs, {} LMs \
                     and {} workers",
                    at.0 / 1000,
                    roles.gms,
                    roles.lms,
                    roles.workers
                ));
            }
        }
        Ok(())
    }

    /// Whether every fault ends by the end of the schedule: each crash is followed
    /// by a restart, each partition by a heal, each refusal by an accept, a broker
    /// outage by its end and per-message faults are off (liveness is owed only then).
    pub fn is_closed(&self) -> bool {
        let mut down = std::collections::HashSet::new();
        let (mut cut, mut broker) = (false, false);
        let mut rates = [false; 3];
        let mut refusing = std::collections::HashSet::new();
        for (_, f) in &self.faults {
            match f {
                Fault::Crash(r) => {
                    down.insert(*r);
                }
                Fault::Restart(r) => {
                    down.remove(r);
                }
                Fault::Partition(..) => cut = true,
                Fault::Heal => cut = false,
                Fault::Refuse(w) => {
                    refusing.insert(*w);
                }
                Fault::Accept(w) => {
                    refusing.remove(w);
                }
                Fault::BrokerDown => broker = true,
                Fault::BrokerUp => broker = false,
                Fault::Rates(None, r) => rates = [!r.is_off(); 3],
                Fault::Rates(Some(link), r) => rates[*link as usize] = !r.is_off(),
                Fault::Skew(..) => {}
            }
        }
        down.is_empty() && refusing.is_empty() && !cut && !broker && rates == [false; 3]
    }
}

/// Why a script was refused: the line and what is wrong with it.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("fault script line {line}: {reason}")]
pub struct ScriptError {
    pub line: usize,
    pub reason: String,
}

impl Schedule {
    /// Reads a script (see the module documentation).
    pub fn parse(text: &str) -> Result<Schedule, ScriptError> {
        let mut faults = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let err = |reason: String| ScriptError {
                line: i + 1,
                reason,
            };
            let (at, rest) = line
                .split_once(char::is_whitespace)
                .ok_or_else(|| err("expected `<ms> <fault> ...`".into()))?;
            let at = parse_ms(at)
                .ok_or_else(|| err(format!("time `{at}` is not a number of milliseconds")))?;
            let fault = parse_fault(rest.trim()).map_err(err)?;
            faults.push((at, fault));
        }
        faults.sort_by_key(|(at, _)| *at);
        Ok(Schedule { faults })
    }
}

/// Milliseconds with up to three decimals (microseconds): `2848` or `2848.125`.
fn parse_ms(text: &str) -> Option<Micros> {
    let (ms, us) = text.split_once('.').unwrap_or((text, ""));
    if us.len() > 3 || !us.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let ms: u64 = ms.parse().ok()?;
    let us: u64 = if us.is_empty() {
        0
    } else {
        format!("{us:0<3}").parse().ok()?
    };
    ms.checked_mul(1000)?.checked_add(us).map(Micros)
}

fn parse_fault(text: &str) -> Result<Fault, String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let role = |w: Option<&&str>| -> Result<Role, String> {
        w.ok_or_else(|| format!("`{text}`: missing role"))?.parse()
    };
    let worker = |w: Option<&&str>| -> Result<u32, String> {
        match role(w)? {
            Role::Worker(n) => Ok(n),
            other => Err(format!("`{text}`: {other} is not a worker (wN)")),
        }
    };
    Ok(match words.first().copied() {
        Some("crash") => Fault::Crash(role(words.get(1))?),
        Some("restart") => Fault::Restart(role(words.get(1))?),
        Some("heal") => Fault::Heal,
        Some("refuse") => Fault::Refuse(worker(words.get(1))?),
        Some("accept") => Fault::Accept(worker(words.get(1))?),
        Some("broker") => match words.get(1).copied() {
            Some("down") => Fault::BrokerDown,
            Some("up") => Fault::BrokerUp,
            _ => return Err(format!("`{text}`: expected `broker down` or `broker up`")),
        },
        Some("skew") => {
            let r = role(words.get(1))?;
            let ms = words
                .get(2)
                .and_then(|m| m.parse().ok())
                .ok_or_else(|| format!("`{text}`: expected `skew <role> <signed ms>`"))?;
            Fault::Skew(r, ms)
        }
        Some("partition") => {
            let rest = text["partition".len()..].trim();
            let (a, b) = rest
                .split_once('|')
                .ok_or_else(|| format!("`{text}`: expected `partition a,b | c,d`"))?;
            let set = |s: &str| -> Result<Vec<Role>, String> {
                s.split(',')
                    .map(str::trim)
                    .filter(|r| !r.is_empty())
                    .map(str::parse)
                    .collect()
            };
            let (a, b) = (set(a)?, set(b)?);
            if a.is_empty() || b.is_empty() {
                return Err(format!("`{text}`: both sides of a partition need a role"));
            }
            Fault::Partition(a, b)
        }
        Some("rates") => {
            let mut rates = LinkRates::default();
            let mut link = None;
            for kv in &words[1..] {
                if *kv == "off" {
                    continue;
                }
                if let Some(name) = kv.strip_prefix("link=") {
                    link = Some(
                        Link::ALL
                            .into_iter()
                            .find(|l| l.name() == name)
                            .ok_or_else(|| {
                                format!("`{kv}`: a link is gm-lm, lm-worker or state")
                            })?,
                    );
                    continue;
                }
                let (k, v) = kv
                    .split_once('=')
                    .ok_or_else(|| format!("`{kv}`: expected name=probability"))?;
                let v: f64 = v
                    .parse()
                    .ok()
                    .filter(|p| (0.0..=1.0).contains(p))
                    .ok_or_else(|| format!("`{kv}`: a probability between 0 and 1"))?;
                match k {
                    "loss" => rates.loss = v,
                    "dup" => rates.dup = v,
                    "delay" => rates.delay = v,
                    "reorder" => rates.reorder = v,
                    _ => return Err(format!("`{k}`: expected loss, dup, delay or reorder")),
                }
            }
            Fault::Rates(link, rates)
        }
        _ => return Err(format!("`{text}`: unknown fault")),
    })
}

/// How many faults of each kind a random schedule holds (at most; drawn uniformly
/// from 0 to the number), and the per-message rates while faults last.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultRates {
    pub crashes: u32,
    pub partitions: u32,
    pub refusals: u32,
    pub broker_outages: u32,
    pub skews: u32,
    /// Largest clock skew, milliseconds (either way).
    pub max_skew_ms: i64,
    pub links: LinkRates,
}

impl Default for FaultRates {
    fn default() -> Self {
        FaultRates {
            crashes: 3,
            partitions: 2,
            refusals: 1,
            broker_outages: 1,
            skews: 2,
            max_skew_ms: 30_000,
            links: LinkRates {
                loss: 0.03,
                dup: 0.03,
                delay: 0.05,
                reorder: 0.05,
            },
        }
    }
}

/// The roles of a cluster, to draw faults over.
#[derive(Clone, Copy, Debug)]
pub struct Roles {
    pub gms: u16,
    pub lms: u16,
    pub workers: u32,
}

impl Roles {
    fn any(&self, rng: &mut SeededRng) -> Role {
        let total = u32::from(self.gms) + u32::from(self.lms) + self.workers;
        let k = rng.random_range(0..total);
        if k < u32::from(self.gms) {
            Role::Gm(k as u16)
        } else if k < u32::from(self.gms) + u32::from(self.lms) {
            Role::Lm((k - u32::from(self.gms)) as u16)
        } else {
            Role::Worker(k - u32::from(self.gms) - u32::from(self.lms))
        }
    }

    fn all(&self) -> Vec<Role> {
        (0..self.gms)
            .map(Role::Gm)
            .chain((0..self.lms).map(Role::Lm))
            .chain((0..self.workers).map(Role::Worker))
            .collect()
    }
}

/// A random schedule within `[0, horizon)`: every fault kind ends (restart, heal,
/// accept, broker up, rates off) before the horizon.
pub fn random(seed: u64, roles: Roles, rates: &FaultRates, horizon: Micros) -> Schedule {
    let mut rng = seeded(seed, SCHEDULE_STREAM);
    let h = horizon.0.max(2);
    let mut faults = Vec::new();
    let span = |rng: &mut SeededRng| {
        let a = rng.random_range(0..h - 1);
        let b = rng.random_range(a + 1..h);
        (Micros(a), Micros(b))
    };
    // A skew acts at the role's next start (at time zero: its first).
    for _ in 0..rng.random_range(0..=rates.skews) {
        let role = roles.any(&mut rng);
        let ms = rng.random_range(-rates.max_skew_ms..=rates.max_skew_ms);
        let at = if rng.random_bool(0.5) {
            Micros::ZERO
        } else {
            Micros(rng.random_range(0..h))
        };
        faults.push((at, Fault::Skew(role, ms)));
    }
    for _ in 0..rng.random_range(0..=rates.crashes) {
        let role = roles.any(&mut rng);
        let (a, b) = span(&mut rng);
        faults.push((a, Fault::Crash(role)));
        faults.push((b, Fault::Restart(role)));
    }
    for _ in 0..rng.random_range(0..=rates.partitions) {
        let mut all = roles.all();
        let cut = rng.random_range(1..all.len());
        // A seeded shuffle, then a cut: two non-empty sides.
        for i in (1..all.len()).rev() {
            all.swap(i, rng.random_range(0..=i));
        }
        let b = all.split_off(cut);
        let (x, y) = span(&mut rng);
        faults.push((x, Fault::Partition(all, b)));
        faults.push((y, Fault::Heal));
    }
    if roles.workers > 0 {
        for _ in 0..rng.random_range(0..=rates.refusals) {
            let w = rng.random_range(0..roles.workers);
            let (a, b) = span(&mut rng);
            faults.push((a, Fault::Refuse(w)));
            faults.push((b, Fault::Accept(w)));
        }
    }
    for _ in 0..rng.random_range(0..=rates.broker_outages) {
        let (a, b) = span(&mut rng);
        faults.push((a, Fault::BrokerDown));
        faults.push((b, Fault::BrokerUp));
    }
    if !rates.links.is_off() {
        faults.push((Micros::ZERO, Fault::Rates(None, rates.links)));
        faults.push((Micros(h - 1), Fault::Rates(None, LinkRates::default())));
    }
    faults.sort_by_key(|(at, _)| *at);
    Schedule { faults }
}

#[cfg(test)]
mod tests;
