// Cast between the dtypes the GPU delegates hold: f32, i32, i64 (low word, high word)
// and bool (one byte an element).
//
// Every conversion is done on the integer bits, with no float arithmetic: drivers may
// flush subnormals or fold float compares as if no NaN or infinity existed (see
// backends/vulkan/conformance-expectations.txt), and an i64 does not fit an f32
// conversion at all. Float to integer truncates toward zero and saturates, NaN giving 0
// (ONNX leaves out-of-range values undefined; this is the reference kernel's choice).
// Integer to f32 rounds to nearest, ties to even, from the full 64 bits. i64 to i32
// keeps the low word (wrapping, as ONNX narrowing does). To bool is "not zero" (NaN is
// true, -0 false); from bool gives 0 or 1.
//
// A bool output is written a word (four elements) per invocation, since WGSL has no
// byte stores; the bytes past n in its last word are 0, in the tensor's padding.
//
// Bindings: 0 src (read), 3 dst (read_write), 4 params (u32).
// Params: [0] n, [1] source dtype, [2] target dtype (0 f32, 1 i32, 2 i64, 3 bool).
// Override: WG, the workgroup size. Dispatch: ceil(m / WG) workgroups over x, then y,
// where m is n, or ceil(n / 4) for a bool target.

@group(0) @binding(0) var<storage, read> src: array<u32>;
@group(0) @binding(3) var<storage, read_write> dst: array<u32>;
@group(0) @binding(4) var<storage, read> p: array<u32>;

override WG: u32 = 64u;

// Element i of the source: an f32's bits in x, or an integer (bool as 0 or 1) widened
// to 64 bits as (low word, high word).
fn load(i: u32) -> vec2<u32> {
    let t = p[1];
    if (t == 0u) {
        return vec2<u32>(src[i], 0u);
    }
    if (t == 1u) {
        let v = src[i];
        return vec2<u32>(v, select(0u, 0xffffffffu, (v >> 31u) == 1u));
    }
    if (t == 2u) {
        return vec2<u32>(src[2u * i], src[2u * i + 1u]);
    }
    return vec2<u32>(min((src[i >> 2u] >> (8u * (i & 3u))) & 0xffu, 1u), 0u);
}

fn negate64(v: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(~v.x + 1u, ~v.y + select(0u, 1u, v.x == 0u));
}

// A 64-bit two's complement integer as the nearest f32's bits (ties to even).
fn int_to_f32(v: vec2<u32>) -> u32 {
    let neg = (v.y >> 31u) == 1u;
    var m64 = v;
    if (neg) {
        m64 = negate64(v);
    }
    var h = m64.y;
    var l = m64.x;
    if (h == 0u && l == 0u) {
        return 0u;
    }
    // Shift the magnitude left until its leading 1 is bit 63.
    var lz = 0u;
    if (h != 0u) {
        lz = countLeadingZeros(h);
    } else {
        lz = 32u + countLeadingZeros(l);
    }
    if (lz >= 32u) {
        h = l << (lz - 32u);
        l = 0u;
    } else if (lz > 0u) {
        h = (h << lz) | (l >> (32u - lz));
        l = l << lz;
    }
    var e = 63u - lz;
    var m = h >> 8u;
    let half = ((h >> 7u) & 1u) == 1u;
    let sticky = (h & 0x7fu) != 0u || l != 0u;
    if (half && (sticky || (m & 1u) == 1u)) {
        m += 1u;
        if (m == 0x1000000u) {
            m = m >> 1u;
            e += 1u;
        }
    }
    return select(0u, 0x80000000u, neg) | ((e + 127u) << 23u) | (m & 0x7fffffu);
}

fn is_nan(bits: u32) -> bool {
    return (bits & 0x7fffffffu) > 0x7f800000u;
}

// An f32 truncated toward zero into 64 bits, saturating at the limits of an integer of
// `bits_out` bits (32 or 64); NaN gives 0.
fn f32_to_int(bits: u32, bits_out: u32) -> vec2<u32> {
    if (is_nan(bits)) {
        return vec2<u32>(0u, 0u);
    }
    let neg = (bits >> 31u) == 1u;
    let e = (bits >> 23u) & 0xffu;
    if (e < 127u) {
        return vec2<u32>(0u, 0u); // |x| < 1
    }
    if (e >= 127u + bits_out - 1u) {
        // |x| >= 2^(bits_out - 1): the limit of the sign (-2^(bits_out - 1) is exact).
        if (bits_out == 32u) {
            return select(vec2<u32>(0x7fffffffu, 0u), vec2<u32>(0x80000000u, 0xffffffffu), neg);
        }
        return select(vec2<u32>(0xffffffffu, 0x7fffffffu), vec2<u32>(0u, 0x80000000u), neg);
    }
    // 1 <= |x| < 2^63: the 24-bit significand shifted by e - 150 (right if negative).
    let m = (bits & 0x7fffffu) | 0x800000u;
    var v = vec2<u32>(0u, 0u);
    if (e <= 150u) {
        v = vec2<u32>(m >> (150u - e), 0u);
    } else {
        let s = e - 150u;
        if (s >= 32u) {
            v = vec2<u32>(0u, m << (s - 32u));
        } else {
            v = vec2<u32>(m << s, m >> (32u - s));
        }
    }
    if (neg) {
        v = negate64(v);
    }
    return v;
}

// Element i converted to the target dtype: (word, high word of an i64).
fn convert(i: u32) -> vec2<u32> {
    let from_float = p[1] == 0u;
    let v = load(i);
    let to = p[2];
    if (to == 0u) {
        return vec2<u32>(select(int_to_f32(v), v.x, from_float), 0u);
    }
    if (to == 3u) {
        let nonzero = select(v.x != 0u || v.y != 0u, (v.x & 0x7fffffffu) != 0u, from_float);
        return vec2<u32>(select(0u, 1u, nonzero), 0u);
    }
    if (from_float) {
        return f32_to_int(v.x, select(64u, 32u, to == 1u));
    }
    return v;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_id) lid: vec3<u32>) {
    let i = (wid.y * nwg.x + wid.x) * WG + lid.x;
    let n = p[0];
    let to = p[2];
    if (to == 3u) {
        if (i >= (n + 3u) / 4u) { return; }
        var word = 0u;
        for (var k = 0u; k < 4u; k++) {
            if (4u * i + k >= n) { break; }
            word |= convert(4u * i + k).x << (8u * k);
        }
        dst[i] = word;
        return;
    }
    if (i >= n) { return; }
    let v = convert(i);
    if (to == 2u) {
        dst[2u * i] = v.x;
        dst[2u * i + 1u] = v.y;
    } else {
        dst[i] = v.x;
    }
}
