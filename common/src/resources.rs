//! Multi-dimensional resources. Every dimension is checked independently: a node
//! fits a request only when it has enough of each.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An amount of resources: CPU in millicores (1000 = one core) and memory in MiB.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Resources {
    pub cpu_millis: u64,
    pub memory_mb: u64,
}

impl Resources {
    pub const ZERO: Resources = Resources {
        cpu_millis: 0,
        memory_mb: 0,
    };

    pub fn new(cpu_millis: u64, memory_mb: u64) -> Self {
        Resources {
            cpu_millis,
            memory_mb,
        }
    }

    /// Whole cores and MiB.
    pub fn cores(cores: u64, memory_mb: u64) -> Self {
        Resources::new(cores.saturating_mul(1000), memory_mb)
    }

    /// True when every dimension of `request` is available in `self`.
    #[inline]
    pub fn fits(&self, request: &Resources) -> bool {
        self.cpu_millis >= request.cpu_millis && self.memory_mb >= request.memory_mb
    }

    /// `self - other`, or `None` when any dimension would go negative.
    #[inline]
    pub fn checked_sub(&self, other: &Resources) -> Option<Resources> {
        Some(Resources {
            cpu_millis: self.cpu_millis.checked_sub(other.cpu_millis)?,
            memory_mb: self.memory_mb.checked_sub(other.memory_mb)?,
        })
    }

    /// `self - other`, clamped at zero in each dimension.
    #[inline]
    pub fn saturating_sub(&self, other: &Resources) -> Resources {
        Resources {
            cpu_millis: self.cpu_millis.saturating_sub(other.cpu_millis),
            memory_mb: self.memory_mb.saturating_sub(other.memory_mb),
        }
    }

    #[inline]
    pub fn add(&self, other: &Resources) -> Resources {
        Resources {
            cpu_millis: self.cpu_millis.saturating_add(other.cpu_millis),
            memory_mb: self.memory_mb.saturating_add(other.memory_mb),
        }
    }

    /// True when any dimension is zero (nothing could be placed here that asks for
    /// something in every dimension).
    #[inline]
    pub fn any_zero(&self) -> bool {
        self.cpu_millis == 0 || self.memory_mb == 0
    }

    pub fn is_zero(&self) -> bool {
        self.cpu_millis == 0 && self.memory_mb == 0
    }

    /// This amount scaled by `fraction` (clamped to [0, 1]), rounded down: e.g. the
    /// share of a node QUEUEABLE work may use.
    pub fn scaled(&self, fraction: f64) -> Resources {
        let f = if fraction.is_finite() {
            fraction.clamp(0.0, 1.0)
        } else {
            1.0
        };
        Resources {
            cpu_millis: (self.cpu_millis as f64 * f) as u64,
            memory_mb: (self.memory_mb as f64 * f) as u64,
        }
    }

    /// `duration` of work on this amount, spread over a node of `capacity`: the time
    /// the whole node would need for it (CPU-weighted; the node's time when `capacity`
    /// has no CPU).
    pub fn node_time(&self, duration: crate::Micros, capacity: &Resources) -> crate::Micros {
        if capacity.cpu_millis == 0 {
            return duration;
        }
        let t = duration.0 as u128 * self.cpu_millis as u128 / capacity.cpu_millis as u128;
        crate::Micros(t.min(u64::MAX as u128) as u64)
    }

    /// The largest fraction of `total` this amount represents over all dimensions
    /// (the dominant share of DRF). Dimensions where `total` is zero are ignored.
    pub fn dominant_share(&self, total: &Resources) -> f64 {
        let cpu = if total.cpu_millis > 0 {
            self.cpu_millis as f64 / total.cpu_millis as f64
        } else {
            0.0
        };
        let mem = if total.memory_mb > 0 {
            self.memory_mb as f64 / total.memory_mb as f64
        } else {
            0.0
        };
        cpu.max(mem)
    }
}

impl std::iter::Sum for Resources {
    fn sum<I: Iterator<Item = Resources>>(iter: I) -> Resources {
        iter.fold(Resources::ZERO, |acc, r| acc.add(&r))
    }
}

impl<'a> std::iter::Sum<&'a Resources> for Resources {
    fn sum<I: Iterator<Item = &'a Resources>>(iter: I) -> Resources {
        iter.copied().sum()
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}m cpu, {} MiB", self.cpu_millis, self.memory_mb)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_checks_every_dimension() {
        let node = Resources::new(2000, 1024);
        assert!(node.fits(&Resources::new(2000, 1024)));
        assert!(!node.fits(&Resources::new(2001, 1)));
        assert!(!node.fits(&Resources::new(1, 1025)));
    }

    #[test]
    fn checked_sub_refuses_to_go_negative() {
        let node = Resources::new(1000, 100);
        assert_eq!(
            node.checked_sub(&Resources::new(400, 100)),
            Some(Resources::new(600, 0))
        );
        assert_eq!(node.checked_sub(&Resources::new(400, 101)), None);
    }

    #[test]
    fn sums_every_dimension() {
        let parts = [Resources::new(1, 2), Resources::new(10, 20)];
        assert_eq!(parts.iter().sum::<Resources>(), Resources::new(11, 22));
        assert_eq!(
            std::iter::empty::<Resources>().sum::<Resources>(),
            Resources::ZERO
        );
    }

    #[test]
    fn dominant_share_takes_the_larger_dimension() {
        let total = Resources::new(10_000, 1000);
        assert!((Resources::new(1000, 500).dominant_share(&total) - 0.5).abs() < 1e-12);
        assert!((Resources::new(5000, 100).dominant_share(&total) - 0.5).abs() < 1e-12);
    }
}
