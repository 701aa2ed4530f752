//! The placement-constraint model of the Megha simulator (after Sharma et al.,
//! SoCC 2011): how often tasks ask for each of 21 constraints, and how often machines
//! have them. The numbers are data from `constraint-model.md`.

use crate::rng::Rng;
use crate::ConstraintSet;

/// Fraction of machines that have constraint `j` (measured on the 10,000-node config).
pub const MACHINE_CONSTRAINT_FRACTIONS: [f64; 21] = [
    0.376, 0.657, 0.156, 0.377, 0.683, 0.111, 0.284, 0.155, 0.703, 0.733, 0.487, 0.470, 0.317,
    0.080, 0.693, 0.151, 0.563, 0.276, 0.668, 0.700, 1.000,
];

/// Task constraint frequency vectors: percent chance that a task of statistical
/// cluster `c` requests constraint `j`.
pub const TCFV: [[f64; 21]; 10] = [
    [
        8.0, 7.0, 7.0, 10.0, 23.0, 20.0, 30.0, 1.0, 3.0, 1.0, 4.0, 3.0, 2.0, 1.0, 4.0, 2.0, 9.0,
        8.0, 11.0, 25.0, 29.0,
    ],
    [
        7.5, 6.6, 6.6, 9.4, 21.6, 18.8, 28.2, 0.9, 2.8, 0.9, 3.8, 2.8, 1.9, 0.9, 3.8, 1.9, 8.5,
        7.5, 10.3, 23.5, 27.3,
    ],
    [
        7.8, 6.9, 6.9, 9.8, 22.5, 19.6, 29.4, 1.0, 2.9, 1.0, 3.9, 2.9, 2.0, 1.0, 3.9, 2.0, 8.8,
        7.8, 10.8, 24.5, 28.4,
    ],
    [
        5.8, 5.0, 5.0, 7.2, 16.6, 14.4, 21.6, 0.7, 2.2, 0.7, 2.9, 2.2, 1.4, 0.7, 2.9, 1.4, 6.5,
        5.8, 7.9, 18.0, 20.9,
    ],
    [
        9.7, 8.5, 8.5, 12.1, 27.8, 24.2, 36.3, 1.2, 3.6, 1.2, 4.8, 3.6, 2.4, 1.2, 4.8, 2.4, 10.9,
        9.7, 13.3, 30.2, 35.1,
    ],
    [
        6.6, 5.7, 5.7, 8.2, 18.9, 16.4, 24.6, 0.8, 2.5, 0.8, 3.3, 2.5, 1.6, 0.8, 3.3, 1.6, 7.4,
        6.6, 9.0, 20.5, 23.8,
    ],
    [
        8.7, 7.6, 7.6, 10.9, 25.1, 21.8, 32.7, 1.1, 3.3, 1.1, 4.4, 3.3, 2.2, 1.1, 4.4, 2.2, 9.8,
        8.7, 12.0, 27.3, 31.6,
    ],
    [
        4.7, 4.1, 4.1, 5.9, 13.6, 11.8, 17.7, 0.6, 1.8, 0.6, 2.4, 1.8, 1.2, 0.6, 2.4, 1.2, 5.3,
        4.7, 6.5, 14.8, 17.1,
    ],
    [
        5.7, 5.0, 5.0, 7.1, 16.3, 14.2, 21.3, 0.7, 2.1, 0.7, 2.8, 2.1, 1.4, 0.7, 2.8, 1.4, 6.4,
        5.7, 7.8, 17.8, 20.6,
    ],
    [
        7.2, 6.3, 6.3, 9.0, 20.6, 17.9, 26.9, 0.9, 2.7, 0.9, 3.6, 2.7, 1.8, 0.9, 3.6, 1.8, 8.1,
        7.2, 9.9, 22.4, 26.0,
    ],
];

/// `TASK_OCCURRENCE[c][t]`: weight of statistical cluster `c` for task type `t`.
pub const TASK_OCCURRENCE: [[f64; 4]; 10] = [
    [
        0.039628712871287115,
        0.12043316831683168,
        0.13037128712871288,
        0.11675742574257425,
    ],
    [
        0.1404950495049505,
        0.07971534653465345,
        0.16081683168316832,
        0.12047029702970297,
    ],
    [
        0.05905940594059404,
        0.11016089108910891,
        0.1506683168316832,
        0.13383663366336634,
    ],
    [
        0.12032178217821782,
        0.12043316831683168,
        0.049306930693069295,
        0.09658415841584157,
    ],
    [
        0.08987623762376236,
        0.09976485148514852,
        0.16081683168316832,
        0.11675742574257425,
    ],
    [
        0.11004950495049505,
        0.09976485148514852,
        0.12047029702970297,
        0.1101980198019802,
    ],
    [
        0.08987623762376236,
        0.059294554455445535,
        0.028886138613861374,
        0.049306930693069295,
    ],
    [
        0.1404950495049505,
        0.13033415841584156,
        0.049306930693069295,
        0.10388613861386138,
    ],
    [
        0.12032178217821782,
        0.09011138613861384,
        0.12047029702970297,
        0.09980198019801981,
    ],
    [
        0.08987623762376236,
        0.08998762376237622,
        0.028886138613861374,
        0.052400990099009885,
    ],
];

/// Draws one task's constraints as the peer simulator does: a task type uniformly from
/// 1..4, a statistical cluster weighted by that type's column, then constraint `j` when
/// a uniform draw in [0, 100) is at most `TCFV[cluster][j]`.
pub fn synthesize_task_constraints<R: Rng>(rng: &mut R) -> ConstraintSet {
    let task_type = rng.random_range(0..4usize);
    let total: f64 = TASK_OCCURRENCE.iter().map(|w| w[task_type]).sum();
    let mut pick = rng.random::<f64>() * total;
    let mut cluster = TASK_OCCURRENCE.len() - 1;
    for (c, w) in TASK_OCCURRENCE.iter().enumerate() {
        if pick < w[task_type] {
            cluster = c;
            break;
        }
        pick -= w[task_type];
    }
    let mut set = ConstraintSet::EMPTY;
    for (j, pct) in TCFV[cluster].iter().enumerate() {
        if rng.random::<f64>() * 100.0 <= *pct {
            set.insert(j);
        }
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{seeded, streams};

    #[test]
    fn synthesis_frequencies_follow_the_model() {
        let mut rng = seeded(11, streams::TASK_CONSTRAINTS);
        let n = 20_000;
        let mut count6 = 0;
        let mut count13 = 0;
        for _ in 0..n {
            let s = synthesize_task_constraints(&mut rng);
            count6 += s.contains(6) as u32;
            count13 += s.contains(13) as u32;
        }
        // constraint 6 is asked for by roughly 17-36 % of tasks, 13 by under 1.3 %
        let f6 = count6 as f64 / n as f64;
        let f13 = count13 as f64 / n as f64;
        assert!((0.17..0.37).contains(&f6), "{f6}");
        assert!(f13 < 0.013, "{f13}");
    }
}
