// Activation functions shared by the element-wise, matmul and conv kernels (a kernel
// pulls this file in with `// requires: activation.wgsl`). Codes match
// `Activation::code` in the Vulkan delegate (backends/vulkan/src/plan.rs).
//
// NaN propagates through every function: comparisons are written so that a NaN input
// takes the branch that returns it, never relying on min/max NaN rules, which SPIR-V
// leaves undefined.

fn activate(x: f32, code: u32, a: f32, b: f32) -> f32 {
    switch code {
        case 1u: { return select(x, 0.0, x < 0.0); }                 // Relu
        case 2u: {                                                      // Clip [a, b]
            let v = select(x, a, x < a);
            return select(v, b, v > b);
        }
        case 3u: { return 1.0 / (1.0 + exp(-x)); }                     // Sigmoid
        case 4u: { return tanh_stable(x); }                            // Tanh
        case 5u: { return 0.5 * x * (1.0 + erf_approx(x * 0.70710678118654752)); } // Gelu
        case 6u: {                                                      // Gelu (tanh)
            let inner = 0.79788456080286536 * (x + 0.044715 * x * x * x);
            return 0.5 * x * (1.0 + tanh_stable(inner));
        }
        case 7u: { return select(x, a * x, x < 0.0); }                 // LeakyRelu(alpha)
        case 8u: {                                                      // HardSigmoid(alpha, beta)
            let v = a * x + b;
            return select(select(v, 1.0, v > 1.0), 0.0, v < 0.0);
        }
        case 9u: {                                                      // HardSwish
            let v = x / 6.0 + 0.5;
            return x * select(select(v, 1.0, v > 1.0), 0.0, v < 0.0);
        }
        case 10u: { return exp(x); }
        case 11u: { return log_subnormal_safe(x); }
        case 12u: { return sqrt_subnormal_safe(x); }
        case 13u: { return -x; }
        case 14u: { return abs(x); }
        case 15u: { return erf_approx(x); }
        case 16u: { return ceil(x); }
        default: { return x; }
    }
}

// tanh from one exp of a non-positive argument: never overflows, so large |x| gives ±1
// rather than inf/inf.
fn tanh_stable(x: f32) -> f32 {
    if (x != x) { return x; }
    let e = exp(-2.0 * abs(x));
    let t = (1.0 - e) / (1.0 + e);
    return select(t, -t, x < 0.0);
}

// erf to about 2e-7 absolute: a Taylor series near 0 (where the rational form would lose
// relative accuracy), Abramowitz & Stegun 7.1.26 elsewhere.
fn erf_approx(x: f32) -> f32 {
    if (x != x) { return x; }
    let ax = abs(x);
    if (ax < 0.5) {
        let x2 = x * x;
        let s = 1.0 + x2 * (-1.0 / 3.0 + x2 * (0.1 + x2 * (-1.0 / 42.0 + x2 * (1.0 / 216.0 + x2 * (-1.0 / 1320.0)))));
        return 1.1283791670955126 * x * s;
    }
    let t = 1.0 / (1.0 + 0.3275911 * ax);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    let r = 1.0 - poly * exp(-ax * ax);
    return select(r, -r, x < 0.0);
}

// log(x) and sqrt(x) of a subnormal x read it from its bits, never as a float: a driver
// that flushes subnormals (NVIDIA's, even asked for DenormPreserve) reads 1e-40 as 0 (log
// gave -inf, not -92.10) and -1e-40 as -0 (log gave -inf and sqrt -0, not NaN); lavapipe's
// log read a subnormal's exponent as the smallest normal one (-88.02). A positive
// subnormal is m * 2^-149 with m its bits as an integer, which converts to f32 exactly.
// The NaN is made from the input's bits, as WGSL has no NaN constant.
fn log_subnormal_safe(x: f32) -> f32 {
    let bits = bitcast<u32>(x);
    if (bits != 0u && bits < 0x00800000u) {
        return log(f32(bits)) - 103.27892990343185;                   // 149 ln 2
    }
    if (bits > 0x80000000u && bits < 0x80800000u) {
        return bitcast<f32>(bits | 0x7fc00000u);                       // NaN
    }
    return log(x);
}

fn sqrt_subnormal_safe(x: f32) -> f32 {
    let bits = bitcast<u32>(x);
    if (bits != 0u && bits < 0x00800000u) {
        return sqrt(f32(bits) * 2.0) * 2.6469779601696886e-23;        // sqrt(2m) * 2^-75
    }
    if (bits > 0x80000000u && bits < 0x80800000u) {
        return bitcast<f32>(bits | 0x7fc00000u);                       // NaN
    }
    return sqrt(x);
}
