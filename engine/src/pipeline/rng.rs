//! Songloom's own seeded random numbers (xoshiro256** seeded through splitmix64): the same seed
//! gives the same song on the same backend, whatever the platform.

use crate::hash::{GOLDEN, fnv1a, splitmix64};

#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut state = seed;
        Rng { s: [splitmix64(&mut state), splitmix64(&mut state), splitmix64(&mut state), splitmix64(&mut state)] }
    }

    /// An independent stream for a named purpose and index (the noise of window `k`, say).
    pub fn derive(seed: u64, purpose: &str, index: u64) -> Self {
        let tag = fnv1a(purpose.bytes());
        let mut state = seed ^ tag ^ index.wrapping_mul(GOLDEN);
        Rng::new(splitmix64(&mut state))
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal values (Box-Muller), as f32.
    pub fn normals(&mut self, n: usize) -> Vec<f32> {
        let mut out = Vec::with_capacity(n + 1);
        while out.len() < n {
            let u1 = 1.0 - self.uniform(); // (0, 1]
            let u2 = self.uniform();
            let r = (-2.0 * u1.ln()).sqrt();
            let theta = 2.0 * std::f64::consts::PI * u2;
            out.push((r * theta.cos()) as f32);
            out.push((r * theta.sin()) as f32);
        }
        out.truncate(n);
        out
    }

    /// An index drawn with probability proportional to `weights`.
    pub fn categorical(&mut self, weights: &[f32]) -> usize {
        categorical_at(self.uniform(), weights)
    }
}

/// The index of `weights` where their running sum (in f64, in index order) first passes `u` of
/// the total, for `u` in `[0, 1)`: the draw [`Rng::categorical`] makes with the uniform `u`. A
/// GPU's draw (kernels/sampling.cu `draw_guided`) takes the same steps.
pub fn categorical_at(u: f64, weights: &[f32]) -> usize {
    let total: f64 = weights.iter().map(|&w| w as f64).sum();
    let target = u * total;
    let mut acc = 0.0f64;
    let mut last_positive = 0;
    for (i, &w) in weights.iter().enumerate() {
        if w > 0.0 {
            acc += w as f64;
            last_positive = i;
            if acc > target {
                return i;
            }
        }
    }
    last_positive
}
