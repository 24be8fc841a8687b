//! A small seeded generator, so that a failing test reproduces from its seed.

use crate::Tensor;

/// xorshift64*: not for statistics or cryptography, but fast, seedable and the same on
/// every platform, which is what test data needs.
///
/// The conformance kit's expected results depend on the exact sequence (its inputs are
/// drawn from [`Rng::for_id`]), so the algorithm and every method's arithmetic are part of
/// the contract: changing either changes the kit's inputs.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for a small integer seed. The seed is spread over the state first, so
    /// that seeds 1, 2, 3… give unrelated sequences (and 0 does not stick at zero).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    /// A generator whose state is `state` as given, for fuzzers that print and replay
    /// their seed. A zero state would stay zero forever; it is the caller's to avoid.
    pub fn from_state(state: u64) -> Rng {
        Rng(state)
    }

    /// A generator seeded from the FNV-1a hash of `id`, so that a named case draws the
    /// same values whatever other cases exist or run.
    pub fn for_id(id: &str) -> Rng {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in id.bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        Rng(h | 1)
    }

    /// The next raw value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `[0, n)` (`0` when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// Uniform integer in `[lo, hi]`.
    pub fn int(&mut self, lo: i64, hi: i64) -> i64 {
        let span = (hi - lo) as u64 + 1;
        lo + (self.next_u64() % span) as i64
    }

    /// Uniform in `[0, 1)`, with the 53 bits an f64 holds.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// Uniform in `[-1, 1)`: the range most kernels' tests want.
    pub fn f32(&mut self) -> f32 {
        self.f32_in(-1.0, 1.0)
    }

    /// Uniform in `[lo, hi)`, with the 24 bits an f32 holds.
    pub fn f32_in(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32)
    }

    /// `n` values uniform in `[-1, 1)`.
    pub fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.f32()).collect()
    }

    /// `n` values uniform in `[lo, hi)`.
    pub fn vec_in(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.f32_in(lo, hi)).collect()
    }

    /// `n` int8 values over the whole range, -128 included.
    pub fn i8s(&mut self, n: usize) -> Vec<i8> {
        (0..n).map(|_| self.int(-128, 127) as i8).collect()
    }

    /// An f32 tensor of `shape`, uniform in `[-1, 1)`.
    pub fn f32_tensor(&mut self, shape: &[usize]) -> Tensor {
        Tensor::from_f32(shape, &self.vec(shape.iter().product()))
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn f32_is_the_scaled_unit_the_tests_were_written_against() {
        // The backends' tests drew `((x >> 40) / 2^24) * 2 - 1`; f32_in(-1, 1) computes
        // `-1 + 2 * u`, the same float for every u (one exact multiply, one rounding).
        let (mut a, mut b) = (Rng::new(3), Rng::new(3));
        for _ in 0..10_000 {
            let old = ((a.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0;
            assert_eq!(old.to_bits(), b.f32().to_bits());
        }
    }

    #[test]
    fn ranges_hold() {
        let mut r = Rng::new(0);
        for _ in 0..10_000 {
            let i = r.int(-3, 5);
            assert!((-3..=5).contains(&i));
            let u = r.uniform(2.0, 4.0);
            assert!((2.0..4.0).contains(&u));
            assert!(r.below(7) < 7);
        }
        assert_eq!(r.below(0), 0);
    }
}
