//! The commands of a command stream, their bodies and their encoding.
//!
//! Every activation is an int8 buffer in DRAM, row-major as in the IR (NCHW for
//! images). Each command reads int8 buffers and writes one, ending with a requantization
//! and a clamp to `[lo, hi]` (which is also how a fused Relu or Clip runs). Body fields are
//! encoded in the order they are declared below, little-endian, lists as a u32 count then
//! the items; see the crate documentation for the container around them.

use baton_delegate_api::bytes::{ByteReader, ByteWriter};

use crate::quant::{Requant, MAX_SHIFT};

/// Command opcodes, as stored in the stream.
pub mod opcode {
    /// 2-D convolution, `group == 1`.
    pub const CONV2D: u16 = 1;
    /// Depthwise 2-D convolution (`group == C`, any channel multiplier).
    pub const DEPTHWISE: u16 = 2;
    /// Fully connected: MatMul or Gemm with constant weights.
    pub const FC: u16 = 3;
    /// Element-wise addition of two buffers with their own scales.
    pub const ADD: u16 = 4;
    /// Average pooling (also GlobalAveragePool).
    pub const AVGPOOL: u16 = 5;
    /// Max pooling.
    pub const MAXPOOL: u16 = 6;
    /// Reshape or Flatten: a copy with requantization.
    pub const RESHAPE: u16 = 7;
    /// A standalone Relu or Clip: requantization and clamp.
    pub const CLAMP: u16 = 8;
    /// Concatenation.
    pub const CONCAT: u16 = 9;
    /// Softmax by exponent table.
    pub const SOFTMAX: u16 = 10;

    /// The opcode's name in profiles and errors.
    pub fn name(op: u16) -> &'static str {
        match op {
            CONV2D => "CONV2D",
            DEPTHWISE => "DEPTHWISE",
            FC => "FC",
            ADD => "ADD",
            AVGPOOL => "AVGPOOL",
            MAXPOOL => "MAXPOOL",
            RESHAPE => "RESHAPE",
            CLAMP => "CLAMP",
            CONCAT => "CONCAT",
            SOFTMAX => "SOFTMAX",
            _ => "UNKNOWN",
        }
    }
}

/// One command: what it reads and writes and how.
#[derive(Clone, Debug, PartialEq)]
pub struct Command {
    /// An [`opcode`].
    pub op: u16,
    /// The IR node it came from (`name (Op)`), for profiles and errors.
    pub name: String,
    /// Buffers read, in the body's order.
    pub inputs: Vec<u32>,
    /// The buffer written.
    pub output: u32,
    /// The output clamp (int8 range narrowed by a fused Relu/Clip).
    pub lo: i32,
    /// Upper end of the output clamp.
    pub hi: i32,
    /// The operation.
    pub body: Body,
}

/// Convolution geometry, weights and per-channel requantization (CONV2D, DEPTHWISE).
#[derive(Clone, Debug, PartialEq)]
pub struct Conv {
    /// Batch, input channels, input height and width.
    pub n: u32,
    pub c: u32,
    pub h: u32,
    pub w: u32,
    /// Output channels, output height and width.
    pub m: u32,
    pub oh: u32,
    pub ow: u32,
    /// Kernel height and width, strides, dilations, top and left padding.
    pub kh: u32,
    pub kw: u32,
    pub sh: u32,
    pub sw: u32,
    pub dh: u32,
    pub dw: u32,
    pub pt: u32,
    pub pl: u32,
    /// Input and output zero points.
    pub in_zp: i32,
    pub out_zp: i32,
    /// `[m][c or 1][kh][kw]` int8 weights (symmetric: zero point 0).
    pub weights: Vec<i8>,
    /// Bias per output channel, in accumulator units (`x_scale * w_scale[m]`).
    pub bias: Vec<i32>,
    /// `x_scale * w_scale[m] / y_scale` per output channel.
    pub requant: Vec<Requant>,
    /// Output rows per tile and output channels per tile.
    pub tile_rows: u32,
    pub tile_ch: u32,
}

/// A fully connected layer: `rows × k` by `k × n` (FC).
#[derive(Clone, Debug, PartialEq)]
pub struct Fc {
    pub rows: u32,
    pub k: u32,
    pub n: u32,
    pub in_zp: i32,
    pub out_zp: i32,
    /// `[n][k]` int8 weights (output-major, as the MAC array consumes them).
    pub weights: Vec<i8>,
    pub bias: Vec<i32>,
    pub requant: Vec<Requant>,
    /// Rows per tile and output columns per tile.
    pub tile_rows: u32,
    pub tile_cols: u32,
}

/// `out = zp_o + round_half_away(((a - zp_a)·ma + (b - zp_b)·mb) / 2^shift)` (ADD).
#[derive(Clone, Debug, PartialEq)]
pub struct Add {
    pub len: u32,
    pub a_zp: i32,
    pub b_zp: i32,
    pub a_mult: i32,
    pub b_mult: i32,
    pub shift: u8,
    pub out_zp: i32,
    /// Elements per tile.
    pub tile_len: u32,
}

/// Pooling (AVGPOOL, MAXPOOL). MAXPOOL takes the integer maximum and rescales it with
/// `requant[0]`; AVGPOOL sums `q - in_zp` over the window and applies `requant[count-1]`,
/// the multiplier `x_scale / (y_scale · count)` for a window of `count` counted elements.
#[derive(Clone, Debug, PartialEq)]
pub struct Pool {
    pub n: u32,
    pub c: u32,
    pub h: u32,
    pub w: u32,
    pub oh: u32,
    pub ow: u32,
    pub kh: u32,
    pub kw: u32,
    pub sh: u32,
    pub sw: u32,
    pub pt: u32,
    pub pl: u32,
    /// Bottom and right padding (they bound the windows counted with `count_include_pad`).
    pub pb: u32,
    pub pr: u32,
    pub count_include_pad: u8,
    pub in_zp: i32,
    pub out_zp: i32,
    pub requant: Vec<Requant>,
    pub tile_rows: u32,
}

/// `out = zp_o + requant(q - zp_i)` element-wise (RESHAPE, CLAMP).
#[derive(Clone, Debug, PartialEq)]
pub struct Rescale {
    pub len: u32,
    pub in_zp: i32,
    pub out_zp: i32,
    pub requant: Requant,
    pub tile_len: u32,
}

/// One input of a CONCAT: `inner` elements per outer index, rescaled to the output.
#[derive(Clone, Debug, PartialEq)]
pub struct ConcatPart {
    pub inner: u32,
    pub in_zp: i32,
    pub requant: Requant,
}

/// Concatenation: for each of `outer` indices, each part's `inner` elements in turn.
#[derive(Clone, Debug, PartialEq)]
pub struct Concat {
    pub outer: u32,
    pub out_zp: i32,
    pub parts: Vec<ConcatPart>,
}

/// Softmax over `axis_len` elements strided by `inner`, for `outer × inner` rows.
///
/// With `d = max - q` (0..=255 for int8), `lut[d] = round(exp(-x_scale · d) · 2^30)`;
/// per row `sum = Σ lut[d]` (i64), and each output is
/// `zp_o + round_half_away(lut[d] · k / (sum · 2^32))` with `k = round(2^32 / y_scale)`,
/// in 128-bit integers. The table is computed at compile time, as Ethos-U compilers
/// compute their softmax tables; execution is integer only.
#[derive(Clone, Debug, PartialEq)]
pub struct Softmax {
    pub outer: u32,
    pub axis_len: u32,
    pub inner: u32,
    pub out_zp: i32,
    pub lut: Vec<i32>,
    pub k: u64,
}

/// The body of a command.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    Conv(Conv),
    Fc(Fc),
    Add(Add),
    Pool(Pool),
    Rescale(Rescale),
    Concat(Concat),
    Softmax(Softmax),
}

/// A malformed stream: what was wrong, for the init error.
pub type DecodeError = String;

/// The stream's composite fields, written with the SDK's writer: requantizations and the
/// `u32`-count-prefixed lists of the body encoding.
trait WriteFields {
    fn requant(&mut self, r: Requant);
    fn requants(&mut self, rs: &[Requant]);
    fn i8s(&mut self, v: &[i8]);
    fn i32s(&mut self, v: &[i32]);
}

impl WriteFields for ByteWriter {
    fn requant(&mut self, r: Requant) {
        self.i32(r.mult);
        self.u8(r.shift);
    }
    fn requants(&mut self, rs: &[Requant]) {
        self.u32(rs.len() as u32);
        rs.iter().for_each(|&r| self.requant(r));
    }
    fn i8s(&mut self, v: &[i8]) {
        self.u32(v.len() as u32);
        self.bytes(bytemuck::cast_slice(v));
    }
    fn i32s(&mut self, v: &[i32]) {
        self.u32(v.len() as u32);
        v.iter().for_each(|&x| self.i32(x));
    }
}

/// Bytes of one encoded [`Requant`]: an `i32` multiplier and a `u8` shift.
const REQUANT_BYTES: usize = 5;

/// Reads what [`WriteFields`] writes. Each read takes the name of the field, so an error
/// says which field of which body ran out, not just where.
trait ReadFields {
    fn requant(&mut self, what: &'static str) -> Result<Requant, DecodeError>;
    fn requants(&mut self, what: &'static str) -> Result<Vec<Requant>, DecodeError>;
    fn i8s(&mut self, what: &'static str) -> Result<Vec<i8>, DecodeError>;
    fn i32s(&mut self, what: &'static str) -> Result<Vec<i32>, DecodeError>;
    /// `N` consecutive `u32`s: the geometry fields the bodies list first.
    fn u32s<const N: usize>(&mut self, what: &'static str) -> Result<[u32; N], DecodeError>;
}

impl ReadFields for ByteReader<'_> {
    fn requant(&mut self, what: &'static str) -> Result<Requant, DecodeError> {
        let mult = self.i32(what)?;
        let shift = self.u8(what)?;
        if mult < 0 || shift > MAX_SHIFT {
            return Err(format!("{what} ({mult}, {shift}) out of range"));
        }
        Ok(Requant { mult, shift })
    }
    fn requants(&mut self, what: &'static str) -> Result<Vec<Requant>, DecodeError> {
        let n = self.count_u32(REQUANT_BYTES, what)?;
        (0..n).map(|_| self.requant(what)).collect()
    }
    fn i8s(&mut self, what: &'static str) -> Result<Vec<i8>, DecodeError> {
        let n = self.count_u32(1, what)?;
        Ok(bytemuck::cast_slice(self.take(n, what)?).to_vec())
    }
    fn i32s(&mut self, what: &'static str) -> Result<Vec<i32>, DecodeError> {
        let n = self.count_u32(4, what)?;
        (0..n).map(|_| Ok(self.i32(what)?)).collect()
    }
    fn u32s<const N: usize>(&mut self, what: &'static str) -> Result<[u32; N], DecodeError> {
        let mut v = [0; N];
        for x in &mut v {
            *x = self.u32(what)?;
        }
        Ok(v)
    }
}

impl Command {
    /// Appends the command: `u16 opcode, u16 0, str name, u32 n_in, u32 in[n_in],
    /// u32 output, i32 lo, i32 hi, body`.
    pub fn write(&self, w: &mut ByteWriter) {
        w.u16(self.op);
        w.u16(0);
        w.str(&self.name);
        w.u32(self.inputs.len() as u32);
        self.inputs.iter().for_each(|&i| w.u32(i));
        w.u32(self.output);
        w.i32(self.lo);
        w.i32(self.hi);
        match &self.body {
            Body::Conv(b) => {
                for v in [
                    b.n, b.c, b.h, b.w, b.m, b.oh, b.ow, b.kh, b.kw, b.sh, b.sw, b.dh, b.dw, b.pt,
                    b.pl,
                ] {
                    w.u32(v);
                }
                w.i32(b.in_zp);
                w.i32(b.out_zp);
                w.i8s(&b.weights);
                w.i32s(&b.bias);
                w.requants(&b.requant);
                w.u32(b.tile_rows);
                w.u32(b.tile_ch);
            }
            Body::Fc(b) => {
                for v in [b.rows, b.k, b.n] {
                    w.u32(v);
                }
                w.i32(b.in_zp);
                w.i32(b.out_zp);
                w.i8s(&b.weights);
                w.i32s(&b.bias);
                w.requants(&b.requant);
                w.u32(b.tile_rows);
                w.u32(b.tile_cols);
            }
            Body::Add(b) => {
                w.u32(b.len);
                w.i32(b.a_zp);
                w.i32(b.b_zp);
                w.i32(b.a_mult);
                w.i32(b.b_mult);
                w.u8(b.shift);
                w.i32(b.out_zp);
                w.u32(b.tile_len);
            }
            Body::Pool(b) => {
                for v in [
                    b.n, b.c, b.h, b.w, b.oh, b.ow, b.kh, b.kw, b.sh, b.sw, b.pt, b.pl, b.pb, b.pr,
                ] {
                    w.u32(v);
                }
                w.u8(b.count_include_pad);
                w.i32(b.in_zp);
                w.i32(b.out_zp);
                w.requants(&b.requant);
                w.u32(b.tile_rows);
            }
            Body::Rescale(b) => {
                w.u32(b.len);
                w.i32(b.in_zp);
                w.i32(b.out_zp);
                w.requant(b.requant);
                w.u32(b.tile_len);
            }
            Body::Concat(b) => {
                w.u32(b.outer);
                w.i32(b.out_zp);
                w.u32(b.parts.len() as u32);
                for p in &b.parts {
                    w.u32(p.inner);
                    w.i32(p.in_zp);
                    w.requant(p.requant);
                }
            }
            Body::Softmax(b) => {
                w.u32(b.outer);
                w.u32(b.axis_len);
                w.u32(b.inner);
                w.i32(b.out_zp);
                w.i32s(&b.lut);
                w.u64(b.k);
            }
        }
    }

    /// Reads one command written by [`Command::write`]. Only the encoding is checked
    /// here; [`crate::exec`] checks that the sizes fit the buffers.
    pub fn read(r: &mut ByteReader<'_>) -> Result<Command, DecodeError> {
        let op = r.u16("opcode")?;
        let _reserved = r.u16("reserved field")?;
        let name = r.str("command name")?.to_owned();
        let n_in = r.count_u32(4, "input list")?;
        let inputs = (0..n_in)
            .map(|_| r.u32("input list"))
            .collect::<Result<_, _>>()?;
        let output = r.u32("output buffer")?;
        let lo = r.i32("output clamp")?;
        let hi = r.i32("output clamp")?;
        let body = match op {
            opcode::CONV2D | opcode::DEPTHWISE => {
                let [n, c, h, w, m, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl] =
                    r.u32s("conv geometry")?;
                Body::Conv(Conv {
                    n,
                    c,
                    h,
                    w,
                    m,
                    oh,
                    ow,
                    kh,
                    kw,
                    sh,
                    sw,
                    dh,
                    dw,
                    pt,
                    pl,
                    in_zp: r.i32("conv input zero point")?,
                    out_zp: r.i32("conv output zero point")?,
                    weights: r.i8s("conv weights")?,
                    bias: r.i32s("conv bias")?,
                    requant: r.requants("conv requantization")?,
                    tile_rows: r.u32("conv tiling")?,
                    tile_ch: r.u32("conv tiling")?,
                })
            }
            opcode::FC => {
                let [rows, k, n] = r.u32s("fc geometry")?;
                Body::Fc(Fc {
                    rows,
                    k,
                    n,
                    in_zp: r.i32("fc input zero point")?,
                    out_zp: r.i32("fc output zero point")?,
                    weights: r.i8s("fc weights")?,
                    bias: r.i32s("fc bias")?,
                    requant: r.requants("fc requantization")?,
                    tile_rows: r.u32("fc tiling")?,
                    tile_cols: r.u32("fc tiling")?,
                })
            }
            opcode::ADD => Body::Add(Add {
                len: r.u32("add length")?,
                a_zp: r.i32("add zero points")?,
                b_zp: r.i32("add zero points")?,
                a_mult: r.i32("add multipliers")?,
                b_mult: r.i32("add multipliers")?,
                shift: r.u8("add shift")?.min(MAX_SHIFT),
                out_zp: r.i32("add output zero point")?,
                tile_len: r.u32("add tiling")?,
            }),
            opcode::AVGPOOL | opcode::MAXPOOL => {
                let [n, c, h, w, oh, ow, kh, kw, sh, sw, pt, pl, pb, pr] =
                    r.u32s("pool geometry")?;
                Body::Pool(Pool {
                    n,
                    c,
                    h,
                    w,
                    oh,
                    ow,
                    kh,
                    kw,
                    sh,
                    sw,
                    pt,
                    pl,
                    pb,
                    pr,
                    count_include_pad: r.u8("pool count_include_pad")?,
                    in_zp: r.i32("pool input zero point")?,
                    out_zp: r.i32("pool output zero point")?,
                    requant: r.requants("pool requantization")?,
                    tile_rows: r.u32("pool tiling")?,
                })
            }
            opcode::RESHAPE | opcode::CLAMP => Body::Rescale(Rescale {
                len: r.u32("rescale length")?,
                in_zp: r.i32("rescale input zero point")?,
                out_zp: r.i32("rescale output zero point")?,
                requant: r.requant("rescale requantization")?,
                tile_len: r.u32("rescale tiling")?,
            }),
            opcode::CONCAT => {
                let outer = r.u32("concat outer count")?;
                let out_zp = r.i32("concat output zero point")?;
                // Each part: u32 inner, i32 zero point, requantization.
                let n = r.count_u32(8 + REQUANT_BYTES, "concat parts")?;
                let parts = (0..n)
                    .map(|_| {
                        Ok(ConcatPart {
                            inner: r.u32("concat part")?,
                            in_zp: r.i32("concat part")?,
                            requant: r.requant("concat part requantization")?,
                        })
                    })
                    .collect::<Result<_, DecodeError>>()?;
                Body::Concat(Concat {
                    outer,
                    out_zp,
                    parts,
                })
            }
            opcode::SOFTMAX => {
                let [outer, axis_len, inner] = r.u32s("softmax geometry")?;
                Body::Softmax(Softmax {
                    outer,
                    axis_len,
                    inner,
                    out_zp: r.i32("softmax output zero point")?,
                    lut: r.i32s("softmax table")?,
                    k: r.u64("softmax scale")?,
                })
            }
            other => return Err(format!("unknown opcode {other}")),
        };
        Ok(Command {
            op,
            name,
            inputs,
            output,
            lo,
            hi,
            body,
        })
    }
}
