//! Time as integer microseconds: exact, totally ordered and cheap, so that the
//! simulator is deterministic and the cores never read a clock.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A point in time or a span, in microseconds. The cores receive `now` as a `Micros`;
/// the simulator counts from zero, the services from the Unix epoch.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Micros(pub u64);

impl Micros {
    pub const ZERO: Micros = Micros(0);
    pub const MAX: Micros = Micros(u64::MAX);

    pub fn from_secs_f64(secs: f64) -> Micros {
        if secs.is_finite() && secs > 0.0 {
            Micros((secs * 1e6).round() as u64)
        } else {
            Micros(0)
        }
    }

    pub fn from_millis(ms: u64) -> Micros {
        Micros(ms.saturating_mul(1000))
    }

    pub fn from_secs(s: u64) -> Micros {
        Micros(s.saturating_mul(1_000_000))
    }

    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// `self - earlier`, or zero when `earlier` is later.
    pub fn since(self, earlier: Micros) -> Micros {
        Micros(self.0.saturating_sub(earlier.0))
    }
}

impl Add for Micros {
    type Output = Micros;
    fn add(self, rhs: Micros) -> Micros {
        Micros(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign for Micros {
    fn add_assign(&mut self, rhs: Micros) {
        self.0 = self.0.saturating_add(rhs.0);
    }
}

impl Sub for Micros {
    type Output = Micros;
    fn sub(self, rhs: Micros) -> Micros {
        self.since(rhs)
    }
}

impl fmt::Display for Micros {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}s", self.as_secs_f64())
    }
}
