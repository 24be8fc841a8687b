//! A complex FFT of any length, planned at init and run without allocating.
//!
//! Powers of two run an iterative radix-2 transform over a bit-reversal table and a
//! half-length table of twiddles. Every other length runs Bluestein's
//! algorithm: the transform becomes a circular convolution with a chirp, done by three
//! power-of-two transforms of at least `2n - 1` points, so any length (a large prime
//! included) costs O(n log n). The chirp's angles are reduced modulo `2n` as integers
//! before the trigonometry (`k²` grows past what an f64 angle keeps exactly).
//!
//! Why not the `rustfft` crate: the delegate computes in f64 to match the reference's
//! one rounding per output, needs caller-owned scratch (execute allocates nothing) and
//! lengths known at init only; this is ~200 lines against a dependency tree of five
//! crates that the plugin would ship for one op family.
//!
//! Values are `[re, im]` pairs of f64.

use std::f64::consts::PI;

use super::vec_bytes;

/// A complex number as `[re, im]`.
pub(crate) type C64 = [f64; 2];

fn mul(a: C64, b: C64) -> C64 {
    [a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0]]
}

fn conj(a: C64) -> C64 {
    [a[0], -a[1]]
}

/// `e^{-2 pi i k / n}`.
fn twiddle(k: usize, n: usize) -> C64 {
    let a = -2.0 * PI * k as f64 / n as f64;
    [a.cos(), a.sin()]
}

/// An in-place radix-2 transform of a power-of-two length.
#[derive(Clone, Debug)]
struct Radix2 {
    n: usize,
    /// `e^{-2 pi i k / n}` for `k < n / 2`.
    twiddles: Vec<C64>,
    /// The bit-reversed index of each position.
    reversed: Vec<u32>,
}

impl Radix2 {
    fn new(n: usize) -> Radix2 {
        debug_assert!(n.is_power_of_two());
        let bits = n.trailing_zeros();
        let reversed = (0..n as u32)
            .map(|i| {
                if bits == 0 {
                    0
                } else {
                    i.reverse_bits() >> (32 - bits)
                }
            })
            .collect();
        Radix2 {
            n,
            twiddles: (0..n / 2).map(|k| twiddle(k, n)).collect(),
            reversed,
        }
    }

    /// The forward transform of `buf` (`n` values), in place.
    fn forward(&self, buf: &mut [C64]) {
        let n = self.n;
        for (i, &r) in self.reversed.iter().enumerate() {
            let r = r as usize;
            if i < r {
                buf.swap(i, r);
            }
        }
        let mut half = 1;
        while half < n {
            let stride = n / (2 * half);
            for block in buf.chunks_exact_mut(2 * half) {
                let (lo, hi) = block.split_at_mut(half);
                for (j, (a, b)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
                    let t = mul(*b, self.twiddles[j * stride]);
                    *b = [a[0] - t[0], a[1] - t[1]];
                    *a = [a[0] + t[0], a[1] + t[1]];
                }
            }
            half *= 2;
        }
    }

    fn bytes(&self) -> usize {
        vec_bytes(&self.twiddles) + vec_bytes(&self.reversed)
    }
}

/// Bluestein's algorithm for a length `n` that is not a power of two.
#[derive(Clone, Debug)]
struct Bluestein {
    /// `e^{-pi i k² / n}` for `k < n`.
    chirp: Vec<C64>,
    /// The transform of the conjugate chirp laid out circularly over `inner.n` points,
    /// divided by `inner.n` (the inverse transform's scale, folded in).
    kernel: Vec<C64>,
    inner: Radix2,
}

impl Bluestein {
    fn new(n: usize) -> Bluestein {
        let m = (2 * n - 1).next_power_of_two();
        let two_n = 2 * n as u128;
        let chirp: Vec<C64> = (0..n)
            .map(|k| {
                // k² mod 2n, exactly, then the angle -pi (k² mod 2n) / n.
                let q = (k as u128 * k as u128 % two_n) as f64;
                let a = -PI * q / n as f64;
                [a.cos(), a.sin()]
            })
            .collect();
        let inner = Radix2::new(m);
        let mut kernel = vec![[0.0; 2]; m];
        for k in 0..n {
            kernel[k] = conj(chirp[k]);
            if k > 0 {
                kernel[m - k] = conj(chirp[k]);
            }
        }
        inner.forward(&mut kernel);
        let scale = 1.0 / m as f64;
        for v in &mut kernel {
            *v = [v[0] * scale, v[1] * scale];
        }
        Bluestein {
            chirp,
            kernel,
            inner,
        }
    }

    /// The forward transform of `buf` (`n` values) in place, with `scratch` of
    /// `inner.n` values.
    fn forward(&self, buf: &mut [C64], scratch: &mut [C64]) {
        let n = self.chirp.len();
        let m = self.inner.n;
        let scratch = &mut scratch[..m];
        for k in 0..n {
            scratch[k] = mul(buf[k], self.chirp[k]);
        }
        scratch[n..].fill([0.0; 2]);
        self.inner.forward(scratch);
        // The inverse transform as conj(forward(conj(.))), the 1/m already in `kernel`.
        for (s, &k) in scratch.iter_mut().zip(&self.kernel) {
            *s = conj(mul(*s, k));
        }
        self.inner.forward(scratch);
        for k in 0..n {
            buf[k] = mul(conj(scratch[k]), self.chirp[k]);
        }
    }
}

#[derive(Clone, Debug)]
enum Plan {
    Radix2(Radix2),
    Bluestein(Bluestein),
}

/// A transform of one length, forward or inverse.
#[derive(Clone, Debug)]
pub(crate) struct Fft {
    n: usize,
    plan: Plan,
}

impl Fft {
    /// The plan of a length-`n` transform (`n` >= 1).
    pub fn new(n: usize) -> Fft {
        let plan = if n.is_power_of_two() {
            Plan::Radix2(Radix2::new(n))
        } else {
            Plan::Bluestein(Bluestein::new(n))
        };
        Fft { n, plan }
    }

    /// The transform's length.
    pub fn len(&self) -> usize {
        self.n
    }

    /// The scratch values [`Fft::run`] needs.
    pub fn scratch_len(&self) -> usize {
        match &self.plan {
            Plan::Radix2(_) => 0,
            Plan::Bluestein(b) => b.inner.n,
        }
    }

    /// Bytes of the tables.
    pub fn bytes(&self) -> usize {
        match &self.plan {
            Plan::Radix2(r) => r.bytes(),
            Plan::Bluestein(b) => vec_bytes(&b.chirp) + vec_bytes(&b.kernel) + b.inner.bytes(),
        }
    }

    /// Transforms the first `n` values of `buf` in place: `X[k] = sum x[j] e^{∓2 pi i jk/n}`
    /// (the minus sign forward), the inverse scaled by `1/n`. `scratch` holds at least
    /// [`Fft::scratch_len`] values.
    pub fn run(&self, buf: &mut [C64], scratch: &mut [C64], inverse: bool) {
        let buf = &mut buf[..self.n];
        // The inverse as conj(forward(conj(x))) / n.
        if inverse {
            buf.iter_mut().for_each(|v| v[1] = -v[1]);
        }
        match &self.plan {
            Plan::Radix2(r) => r.forward(buf),
            Plan::Bluestein(b) => b.forward(buf, scratch),
        }
        if inverse {
            let s = 1.0 / self.n as f64;
            buf.iter_mut().for_each(|v| *v = [v[0] * s, -v[1] * s]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The direct O(n²) sum, for comparison.
    fn direct(x: &[C64], inverse: bool) -> Vec<C64> {
        let n = x.len();
        let sign = if inverse { 1.0 } else { -1.0 };
        (0..n)
            .map(|k| {
                let mut acc = [0.0; 2];
                for (j, v) in x.iter().enumerate() {
                    let a = sign * 2.0 * PI * ((j * k) % n) as f64 / n as f64;
                    let t = mul(*v, [a.cos(), a.sin()]);
                    acc = [acc[0] + t[0], acc[1] + t[1]];
                }
                if inverse {
                    [acc[0] / n as f64, acc[1] / n as f64]
                } else {
                    acc
                }
            })
            .collect()
    }

    #[test]
    fn matches_the_direct_sum_for_every_length_to_70() {
        for n in 1..=70 {
            let fft = Fft::new(n);
            let x: Vec<C64> = (0..n)
                .map(|j| {
                    [
                        ((j * 7 + 3) % 11) as f64 - 5.0,
                        ((j * 5) % 13) as f64 * 0.25,
                    ]
                })
                .collect();
            for inverse in [false, true] {
                let mut buf = x.clone();
                let mut scratch = vec![[0.0; 2]; fft.scratch_len()];
                fft.run(&mut buf, &mut scratch, inverse);
                for (k, (a, b)) in buf.iter().zip(direct(&x, inverse)).enumerate() {
                    let err = (a[0] - b[0]).abs().max((a[1] - b[1]).abs());
                    assert!(err < 1e-10 * n as f64, "n {n} bin {k}: {a:?} vs {b:?}");
                }
            }
        }
    }

    #[test]
    fn known_spectra() {
        // [1, 2, 3, 4] -> [10, -2+2i, -2, -2-2i] (hand-computed: sum, and
        // X1 = 1 - 2i - 3 + 4i = -2 + 2i).
        let fft = Fft::new(4);
        let mut buf = vec![[1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [4.0, 0.0]];
        fft.run(&mut buf, &mut [], false);
        let want = [[10.0, 0.0], [-2.0, 2.0], [-2.0, 0.0], [-2.0, -2.0]];
        for (a, b) in buf.iter().zip(want) {
            assert!((a[0] - b[0]).abs() < 1e-12 && (a[1] - b[1]).abs() < 1e-12);
        }
        // Length 3 of [1, 0, 0]: every bin 1; of [0, 1, 0]: e^{-2 pi i k / 3}, whose
        // bin 1 is (-1/2, -sqrt(3)/2).
        let fft = Fft::new(3);
        let mut scratch = vec![[0.0; 2]; fft.scratch_len()];
        let mut buf = vec![[0.0, 0.0], [1.0, 0.0], [0.0, 0.0]];
        fft.run(&mut buf, &mut scratch, false);
        assert!((buf[1][0] + 0.5).abs() < 1e-12);
        assert!((buf[1][1] + 3f64.sqrt() / 2.0).abs() < 1e-12);
    }
}
