//! The activations a product's epilogue applies after its adds and clamp, so that a
//! Conv, MatMul or Gemm followed by Sigmoid, SiLU, HardSwish or an Erf GELU writes the
//! activated result in one step instead of leaving a second pass over its output.
//!
//! Each function is the scalar one the activation's own step maps over its input
//! (`ops/elementwise.rs` calls these same functions), written branch-free so that the
//! loops over it vectorize: fused or not, a model's output has the same bits.

use super::Isa;
use crate::ops::math::{erf, exp};

/// An element-wise activation applied to a product's result after the epilogue's adds and
/// clamp (see [`super::Epilogue::activate`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    /// `1 / (1 + e^-x)`.
    Sigmoid,
    /// `x * sigmoid(x)` (SiLU, Swish): torch exports it as `Mul(x, Sigmoid(x))`.
    Silu,
    /// `x < 0 ? alpha x : x`.
    LeakyRelu { alpha: f32 },
    /// `clamp(alpha x + beta, 0, 1)`.
    HardSigmoid { alpha: f32, beta: f32 },
    /// ONNX HardSwish: `x * clamp(x / 6 + 1/2, 0, 1)`.
    HardSwish,
    /// `x * clamp(alpha x + beta, 0, 1)` (torch's `x * hardsigmoid(x)`).
    HardSigmoidMul { alpha: f32, beta: f32 },
    /// The five nodes of an exported Erf GELU: `(x * (erf(x / c) + 1)) * 0.5`, or `x * c`
    /// inside the Erf when the graph multiplies.
    Gelu { divide: bool, c: f32 },
    /// Gelu with `approximate = none`: `(x / 2) (1 + erf(x / sqrt 2))`.
    GeluErf,
}

impl Activation {
    /// The function at one value.
    #[inline(always)]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Activation::Sigmoid => sigmoid(x),
            Activation::Silu => silu(x),
            Activation::LeakyRelu { alpha } => leaky_relu(x, alpha),
            Activation::HardSigmoid { alpha, beta } => clamp01(alpha * x + beta),
            Activation::HardSwish => hard_swish(x),
            Activation::HardSigmoidMul { alpha, beta } => x * clamp01(alpha * x + beta),
            Activation::Gelu { divide, c } => gelu(x, divide, c),
            Activation::GeluErf => gelu_erf(x),
        }
    }

    /// The function over `x`, in place: one loop per function, so that each vectorizes
    /// for the features of the function this is inlined into (a `match` inside one loop
    /// would not), over blocks of a constant 16 values, the last one padded. A loop of
    /// unknown length was vectorized with several vectors a step and its rest left
    /// scalar: a 32-wide tile row ran entirely in the scalar rest (a transformer's fused
    /// GELU took longer than the pass it replaced).
    #[inline(always)]
    pub(crate) fn apply_slice(self, x: &mut [f32]) {
        self.apply_blocks::<64>(x)
    }

    /// [`Activation::apply_slice`] over blocks of `BLOCK` values: 64 (four AVX-512
    /// vectors in flight), 16 where the registers are fewer (AVX2's 16: wider blocks
    /// spilled, and a fused GELU cost twice its own pass).
    #[inline(always)]
    pub(crate) fn apply_blocks<const BLOCK: usize>(self, x: &mut [f32]) {
        #[inline(always)]
        fn each<const BLOCK: usize>(x: &mut [f32], f: impl Fn(f32) -> f32) {
            let mut blocks = x.chunks_exact_mut(BLOCK);
            for b in &mut blocks {
                b.iter_mut().for_each(|v| *v = f(*v));
            }
            let rest = blocks.into_remainder();
            if !rest.is_empty() {
                let mut b = [0f32; BLOCK];
                b[..rest.len()].copy_from_slice(rest);
                b.iter_mut().for_each(|v| *v = f(*v));
                rest.copy_from_slice(&b[..rest.len()]);
            }
        }
        match self {
            Activation::Sigmoid => each::<BLOCK>(x, sigmoid),
            Activation::Silu => each::<BLOCK>(x, silu),
            Activation::LeakyRelu { alpha } => each::<BLOCK>(x, |v| leaky_relu(v, alpha)),
            Activation::HardSigmoid { alpha, beta } => {
                each::<BLOCK>(x, |v| clamp01(alpha * v + beta))
            }
            Activation::HardSwish => each::<BLOCK>(x, hard_swish),
            Activation::HardSigmoidMul { alpha, beta } => {
                each::<BLOCK>(x, |v| v * clamp01(alpha * v + beta))
            }
            Activation::Gelu { divide: true, c } => each::<BLOCK>(x, |v| gelu(v, true, c)),
            Activation::Gelu { divide: false, c } => each::<BLOCK>(x, |v| gelu(v, false, c)),
            Activation::GeluErf => each::<BLOCK>(x, gelu_erf),
        }
    }
}

impl Activation {
    /// The function over `x` in place, compiled for `isa`'s vectors (for the convolution
    /// paths whose last step is not a product's store: depthwise, a residual added after
    /// a layout change).
    pub(crate) fn run(self, isa: Isa, x: &mut [f32]) {
        match isa {
            // SAFETY: an Avx512F kernel is only selected after AVX-512F was detected.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512F => unsafe { run_avx512(self, x) },
            // SAFETY: an Avx2Fma kernel is only selected after AVX2 and FMA were detected.
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2Fma => unsafe { run_avx2(self, x) },
            _ => self.apply_slice(x),
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn run_avx512(f: Activation, x: &mut [f32]) {
    f.apply_slice(x)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run_avx2(f: Activation, x: &mut [f32]) {
    f.apply_blocks::<16>(x)
}

/// `1 / (1 + e^-x)` with the polynomial `exp` of `ops/math.rs`.
#[inline(always)]
pub(crate) fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

/// `x * sigmoid(x)`, rounding the sigmoid first as the two nodes do.
#[inline(always)]
pub(crate) fn silu(x: f32) -> f32 {
    x * sigmoid(x)
}

/// `x < 0 ? alpha * x : x`: NaN and -0 pass through, as in the reference.
#[inline(always)]
pub(crate) fn leaky_relu(x: f32, alpha: f32) -> f32 {
    if x < 0.0 {
        alpha * x
    } else {
        x
    }
}

/// `x * clamp(x / 6 + 1/2, 0, 1)`, multiplying by `x` last as ONNX's function body does.
#[inline(always)]
pub(crate) fn hard_swish(x: f32) -> f32 {
    x * clamp01(x / 6.0 + 0.5)
}

/// `clamp(v, 0, 1)` letting NaN through (`f32::clamp` does).
#[inline(always)]
pub(crate) fn clamp01(v: f32) -> f32 {
    v.clamp(0.0, 1.0)
}

/// The five nodes of an Erf GELU as one function, each operation as the graph has it.
#[inline(always)]
pub(crate) fn gelu(x: f32, divide: bool, c: f32) -> f32 {
    let d = if divide { x / c } else { x * c };
    (x * (erf(d) + 1.0)) * 0.5
}

/// Gelu's `approximate = none` form, halving first so that the largest finite inputs stay
/// finite.
#[inline(always)]
pub(crate) fn gelu_erf(x: f32) -> f32 {
    (x * 0.5) * (erf(x * std::f32::consts::FRAC_1_SQRT_2) + 1.0)
}

/// Every function with typical parameters (for the tests of the kernels that apply them).
#[cfg(test)]
pub(crate) fn every() -> [Activation; 9] {
    [
        Activation::Sigmoid,
        Activation::Silu,
        Activation::LeakyRelu { alpha: 0.1 },
        Activation::HardSigmoid {
            alpha: 0.2,
            beta: 0.5,
        },
        Activation::HardSwish,
        Activation::HardSigmoidMul {
            alpha: 1.0 / 6.0,
            beta: 0.5,
        },
        Activation::Gelu {
            divide: true,
            c: std::f32::consts::SQRT_2,
        },
        Activation::Gelu {
            divide: false,
            c: std::f32::consts::FRAC_1_SQRT_2,
        },
        Activation::GeluErf,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Over values that cover each function's pieces (both signs, the clamps' edges, the
    /// large values where `exp` saturates), NaN and the infinities.
    #[test]
    fn the_slice_form_has_the_bits_of_the_scalar_one() {
        let mut xs: Vec<f32> = (-400..400).map(|i| i as f32 * 0.0371).collect();
        xs.extend([
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -0.0,
            0.0,
            100.0,
            -100.0,
        ]);
        for f in every() {
            let (mut got, mut got16) = (xs.clone(), xs.clone());
            f.apply_slice(&mut got);
            f.apply_blocks::<16>(&mut got16);
            assert!(got
                .iter()
                .zip(&got16)
                .all(|(a, b)| a.to_bits() == b.to_bits()));
            for (&x, &g) in xs.iter().zip(&got) {
                let want = f.apply(x);
                assert!(
                    g.to_bits() == want.to_bits() || (g.is_nan() && want.is_nan()),
                    "{f:?}({x}) = {g}, scalar {want}"
                );
            }
        }
    }

    #[test]
    fn the_functions_are_what_their_names_say() {
        let close = |a: f32, b: f64| (a as f64 - b).abs() < 1e-6 * (1.0 + b.abs());
        for i in -60..60 {
            let x = i as f32 * 0.13;
            let s = 1.0 / (1.0 + (-(x as f64)).exp());
            assert!(close(Activation::Sigmoid.apply(x), s));
            assert!(close(Activation::Silu.apply(x), x as f64 * s));
            let hs = (x as f64 * (x as f64 / 6.0 + 0.5).clamp(0.0, 1.0)) as f32;
            assert!(close(Activation::HardSwish.apply(x), hs as f64));
        }
        assert_eq!(Activation::LeakyRelu { alpha: 0.1 }.apply(-2.0), -0.2);
        assert!(Activation::GeluErf.apply(f32::MAX).is_finite());
        assert!(Activation::Silu.apply(f32::NAN).is_nan());
    }
}
