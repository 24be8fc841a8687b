//! The commands of a command stream, their bodies and their encoding.
//!
//! Every activation is an int8 buffer in DRAM, row-major as in the IR (NCHW for
//! images). Each command reads int8 buffers and writes one, ending with a requantization
//! and a clamp to `[lo, hi]` (which is also how a fused Relu or Clip runs). Body fields are
//! encoded in the order they are declared below, little-endian, lists as a u32 count then
//! the items; see the crate documentation for the container around them.

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

/// Appends little-endian fields.
#[derive(Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    pub fn str(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.buf.extend_from_slice(s.as_bytes());
    }
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
        self.buf.extend_from_slice(bytemuck::cast_slice(v));
    }
    fn i32s(&mut self, v: &[i32]) {
        self.u32(v.len() as u32);
        v.iter().for_each(|&x| self.i32(x));
    }
}

/// Reads little-endian fields, refusing to read past the end.
pub struct Reader<'a> {
    pub buf: &'a [u8],
    pub pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let end = end.ok_or_else(|| format!("truncated at byte {} (wanted {n} more)", self.pos))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    pub fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    /// A count of items of at least `item` bytes each, checked against what is left.
    pub fn count(&mut self, item: usize) -> Result<usize, DecodeError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(item) > self.buf.len() - self.pos {
            return Err(format!(
                "list of {n} items at byte {} overruns the stream",
                self.pos
            ));
        }
        Ok(n)
    }
    pub fn str(&mut self) -> Result<String, DecodeError> {
        let n = self.count(1)?;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| "a name is not UTF-8".into())
    }
    fn requant(&mut self) -> Result<Requant, DecodeError> {
        let mult = self.i32()?;
        let shift = self.u8()?;
        if mult < 0 || shift > MAX_SHIFT {
            return Err(format!("requantization ({mult}, {shift}) out of range"));
        }
        Ok(Requant { mult, shift })
    }
    fn requants(&mut self) -> Result<Vec<Requant>, DecodeError> {
        let n = self.count(5)?;
        (0..n).map(|_| self.requant()).collect()
    }
    fn i8s(&mut self) -> Result<Vec<i8>, DecodeError> {
        let n = self.count(1)?;
        Ok(bytemuck::cast_slice(self.take(n)?).to_vec())
    }
    fn i32s(&mut self) -> Result<Vec<i32>, DecodeError> {
        let n = self.count(4)?;
        (0..n).map(|_| self.i32()).collect()
    }
}

impl Command {
    /// Appends the command: `u16 opcode, u16 0, str name, u32 n_in, u32 in[n_in],
    /// u32 output, i32 lo, i32 hi, body`.
    pub fn write(&self, w: &mut Writer) {
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
    pub fn read(r: &mut Reader<'_>) -> Result<Command, DecodeError> {
        let op = r.u16()?;
        let _reserved = r.u16()?;
        let name = r.str()?;
        let n_in = r.count(4)?;
        let inputs = (0..n_in).map(|_| r.u32()).collect::<Result<_, _>>()?;
        let output = r.u32()?;
        let lo = r.i32()?;
        let hi = r.i32()?;
        let body = match op {
            opcode::CONV2D | opcode::DEPTHWISE => {
                let mut v = [0u32; 15];
                for x in &mut v {
                    *x = r.u32()?;
                }
                let [n, c, h, w, m, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl] = v;
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
                    in_zp: r.i32()?,
                    out_zp: r.i32()?,
                    weights: r.i8s()?,
                    bias: r.i32s()?,
                    requant: r.requants()?,
                    tile_rows: r.u32()?,
                    tile_ch: r.u32()?,
                })
            }
            opcode::FC => Body::Fc(Fc {
                rows: r.u32()?,
                k: r.u32()?,
                n: r.u32()?,
                in_zp: r.i32()?,
                out_zp: r.i32()?,
                weights: r.i8s()?,
                bias: r.i32s()?,
                requant: r.requants()?,
                tile_rows: r.u32()?,
                tile_cols: r.u32()?,
            }),
            opcode::ADD => Body::Add(Add {
                len: r.u32()?,
                a_zp: r.i32()?,
                b_zp: r.i32()?,
                a_mult: r.i32()?,
                b_mult: r.i32()?,
                shift: r.u8()?.min(MAX_SHIFT),
                out_zp: r.i32()?,
                tile_len: r.u32()?,
            }),
            opcode::AVGPOOL | opcode::MAXPOOL => {
                let mut v = [0u32; 14];
                for x in &mut v {
                    *x = r.u32()?;
                }
                let [n, c, h, w, oh, ow, kh, kw, sh, sw, pt, pl, pb, pr] = v;
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
                    count_include_pad: r.u8()?,
                    in_zp: r.i32()?,
                    out_zp: r.i32()?,
                    requant: r.requants()?,
                    tile_rows: r.u32()?,
                })
            }
            opcode::RESHAPE | opcode::CLAMP => Body::Rescale(Rescale {
                len: r.u32()?,
                in_zp: r.i32()?,
                out_zp: r.i32()?,
                requant: r.requant()?,
                tile_len: r.u32()?,
            }),
            opcode::CONCAT => {
                let outer = r.u32()?;
                let out_zp = r.i32()?;
                let n = r.count(13)?;
                let parts = (0..n)
                    .map(|_| {
                        Ok(ConcatPart {
                            inner: r.u32()?,
                            in_zp: r.i32()?,
                            requant: r.requant()?,
                        })
                    })
                    .collect::<Result<_, DecodeError>>()?;
                Body::Concat(Concat {
                    outer,
                    out_zp,
                    parts,
                })
            }
            opcode::SOFTMAX => Body::Softmax(Softmax {
                outer: r.u32()?,
                axis_len: r.u32()?,
                inner: r.u32()?,
                out_zp: r.i32()?,
                lut: r.i32s()?,
                k: r.u64()?,
            }),
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
