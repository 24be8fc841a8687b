//! The interpreter: runs a command stream on int8 buffers, and the cycle model.

use std::time::Instant;

use baton_delegate_api::ir::DType;
use baton_delegate_api::{DelegateError, Executable, ProfileEvent, TensorMut, TensorRef};

use crate::blob::{Machine, Stream};
use crate::command::{opcode, Add, Body, Command, Concat, Conv, Fc, Pool, Rescale, Softmax};
use crate::error::NpuError;
use crate::quant::{div_round, shift_round};
use crate::tiling::PARAM_BYTES;

/// The most bytes of buffers one stream may ask for (a crafted blob must not make the
/// host allocate without bound).
const MAX_BUFFER_BYTES: u64 = 1 << 30;
/// Bytes per cycle between DRAM and SRAM (a 128-bit AXI port).
pub const DRAM_BYTES_PER_CYCLE: u64 = 16;
/// Cycles to set up one tile (descriptor fetch, DMA programming).
pub const TILE_OVERHEAD: u64 = 32;
/// Cycles to decode one command.
pub const COMMAND_OVERHEAD: u64 = 16;

/// An initialised command stream with its buffers.
pub struct NpuExecutable {
    stream: Stream,
    buffers: Vec<Vec<i8>>,
    estimates: Vec<Estimate>,
    events: Vec<ProfileEvent>,
}

/// The cost model's view of one command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// Tiles the command runs in.
    pub tiles: u64,
    /// Multiply-accumulates (or element operations, for element-wise work).
    pub ops: u64,
    /// Operations per cycle of the unit that does them.
    pub ops_per_cycle: u64,
    /// Bytes moved between DRAM and SRAM.
    pub dma_bytes: u64,
    /// The estimate: `max(ops / ops_per_cycle, dma_bytes / 16) + 32·tiles + 16`.
    pub cycles: u64,
}

impl NpuExecutable {
    /// Checks every command against the buffers and prepares them.
    pub fn new(stream: Stream, machine: Machine) -> Result<NpuExecutable, NpuError> {
        validate(&stream)?;
        let buffers = stream
            .buffers
            .iter()
            .map(|&n| vec![0i8; n as usize])
            .collect();
        let estimates = stream
            .commands
            .iter()
            .map(|c| estimate(c, machine))
            .collect();
        Ok(NpuExecutable {
            stream,
            buffers,
            estimates,
            events: Vec::new(),
        })
    }

    /// The cost estimate of every command, in stream order, with its opcode name and node.
    pub fn estimates(&self) -> Vec<(&'static str, String, Estimate)> {
        self.stream
            .commands
            .iter()
            .zip(&self.estimates)
            .map(|(c, e)| (opcode::name(c.op), c.name.clone(), *e))
            .collect()
    }

    fn run_command(&mut self, i: usize) {
        let cmd = &self.stream.commands[i];
        let mut out = std::mem::take(&mut self.buffers[cmd.output as usize]);
        let ins: Vec<&[i8]> = cmd
            .inputs
            .iter()
            .map(|&b| self.buffers[b as usize].as_slice())
            .collect();
        let (lo, hi) = (cmd.lo as i64, cmd.hi as i64);
        let clamp = |v: i64| v.clamp(lo, hi) as i8;
        match &cmd.body {
            Body::Conv(b) => conv(b, cmd.op == opcode::DEPTHWISE, ins[0], &mut out, clamp),
            Body::Fc(b) => fc(b, ins[0], &mut out, clamp),
            Body::Add(b) => add(b, ins[0], ins[1], &mut out, clamp),
            Body::Pool(b) => pool(b, cmd.op == opcode::MAXPOOL, ins[0], &mut out, clamp),
            Body::Rescale(b) => rescale(b, ins[0], &mut out, clamp),
            Body::Concat(b) => concat(b, &ins, &mut out, clamp),
            Body::Softmax(b) => softmax(b, ins[0], &mut out, clamp),
        }
        self.buffers[cmd.output as usize] = out;
    }
}

impl Executable for NpuExecutable {
    fn execute(
        &mut self,
        inputs: &[TensorRef<'_>],
        outputs: &mut [TensorMut<'_>],
    ) -> Result<(), DelegateError> {
        self.events.clear();
        let io = |m: String| DelegateError::from(NpuError::Io(m));
        if inputs.len() != self.stream.inputs.len() || outputs.len() != self.stream.outputs.len() {
            return Err(io(format!(
                "{} inputs and {} outputs given, the partition has {} and {}",
                inputs.len(),
                outputs.len(),
                self.stream.inputs.len(),
                self.stream.outputs.len()
            )));
        }
        for (i, (t, &b)) in inputs.iter().zip(&self.stream.inputs).enumerate() {
            if t.dtype != DType::I8 || t.data.len() != self.buffers[b as usize].len() {
                return Err(io(format!(
                    "input {i} is {} of {} bytes, the stream expects int8 of {} bytes",
                    t.dtype,
                    t.data.len(),
                    self.buffers[b as usize].len()
                )));
            }
        }
        for (i, (t, &b)) in outputs.iter().zip(&self.stream.outputs).enumerate() {
            if t.dtype != DType::I8 || t.data.len() != self.buffers[b as usize].len() {
                return Err(io(format!(
                    "output {i} is {} of {} bytes, the stream writes int8 of {} bytes",
                    t.dtype,
                    t.data.len(),
                    self.buffers[b as usize].len()
                )));
            }
        }
        for (t, &b) in inputs.iter().zip(&self.stream.inputs) {
            let dst = &mut self.buffers[b as usize];
            dst.copy_from_slice(bytemuck::cast_slice(t.data));
        }
        let mut events = Vec::with_capacity(self.stream.commands.len());
        for i in 0..self.stream.commands.len() {
            let start = Instant::now();
            self.run_command(i);
            let wall_ns = start.elapsed().as_nanos() as u64;
            let cmd = &self.stream.commands[i];
            let e = self.estimates[i];
            events.push(ProfileEvent {
                name: format!(
                    "{} [{} tile{}]",
                    cmd.name,
                    e.tiles,
                    if e.tiles == 1 { "" } else { "s" }
                ),
                kind: opcode::name(cmd.op).to_string(),
                cycles: e.cycles,
                wall_ns,
            });
        }
        for (t, &b) in outputs.iter_mut().zip(&self.stream.outputs) {
            t.data
                .copy_from_slice(bytemuck::cast_slice(&self.buffers[b as usize]));
        }
        self.events = events;
        Ok(())
    }

    fn profile(&self) -> Vec<ProfileEvent> {
        self.events.clone()
    }
}

/// Checks that every command's geometry fits its buffers, so the kernels below can index
/// without further checks. A stream that passes cannot make the interpreter read or write
/// out of bounds.
fn validate(s: &Stream) -> Result<(), NpuError> {
    let bad = |m: String| Err(NpuError::Malformed(m));
    let total: u64 = s.buffers.iter().map(|&b| b as u64).sum();
    if total > MAX_BUFFER_BYTES {
        return bad(format!(
            "{total} bytes of buffers, above the limit of {MAX_BUFFER_BYTES}"
        ));
    }
    let nb = s.buffers.len() as u32;
    if let Some(b) = s.inputs.iter().chain(&s.outputs).find(|&&b| b >= nb) {
        return bad(format!("input/output buffer {b} of {nb}"));
    }
    for (i, c) in s.commands.iter().enumerate() {
        let at = |m: String| NpuError::Malformed(format!("command {i} ({}): {m}", c.name));
        if c.output >= nb || c.inputs.iter().any(|&b| b >= nb || b == c.output) {
            return Err(at(
                "buffer index out of range or output aliases an input".into()
            ));
        }
        if c.lo < -128 || c.hi > 127 || c.lo > c.hi {
            return Err(at(format!("clamp [{}, {}]", c.lo, c.hi)));
        }
        let size = |b: u32| s.buffers[b as usize] as u64;
        let (ins, out) =
            shapes(c).ok_or_else(|| at("inconsistent geometry or parameter counts".into()))?;
        if ins.len() != c.inputs.len() {
            return Err(at(format!(
                "{} inputs, the opcode takes {}",
                c.inputs.len(),
                ins.len()
            )));
        }
        for (&b, &want) in c.inputs.iter().zip(&ins) {
            if size(b) != want {
                return Err(at(format!(
                    "input buffer {b} has {} bytes, the command reads {want}",
                    size(b)
                )));
            }
        }
        if size(c.output) != out {
            return Err(at(format!(
                "output buffer has {} bytes, the command writes {out}",
                size(c.output)
            )));
        }
    }
    Ok(())
}

/// Input and output byte counts of a command, or `None` if its body is inconsistent.
fn shapes(c: &Command) -> Option<(Vec<u64>, u64)> {
    let p = |v: &[u32]| v.iter().try_fold(1u64, |a, &x| a.checked_mul(x as u64));
    let positive = |v: &[u32]| v.iter().all(|&x| x >= 1);
    match &c.body {
        Body::Conv(b) => {
            let dw = c.op == opcode::DEPTHWISE;
            let cpg = if dw { 1 } else { b.c };
            let ok = positive(&[
                b.c,
                b.m,
                b.kh,
                b.kw,
                b.sh,
                b.sw,
                b.dh,
                b.dw,
                b.tile_rows,
                b.tile_ch,
            ]) && (!dw || b.m % b.c == 0)
                && p(&[b.m, cpg, b.kh, b.kw])? == b.weights.len() as u64
                && b.bias.len() == b.m as usize
                && b.requant.len() == b.m as usize;
            ok.then_some((vec![p(&[b.n, b.c, b.h, b.w])?], p(&[b.n, b.m, b.oh, b.ow])?))
        }
        Body::Fc(b) => {
            let ok = positive(&[b.tile_rows, b.tile_cols])
                && p(&[b.n, b.k])? == b.weights.len() as u64
                && b.bias.len() == b.n as usize
                && b.requant.len() == b.n as usize;
            ok.then_some((vec![p(&[b.rows, b.k])?], p(&[b.rows, b.n])?))
        }
        Body::Add(b) => positive(&[b.tile_len]).then_some((vec![b.len as u64; 2], b.len as u64)),
        Body::Pool(b) => {
            let ok = positive(&[b.kh, b.kw, b.sh, b.sw, b.tile_rows])
                && if c.op == opcode::MAXPOOL {
                    b.requant.len() == 1
                } else {
                    b.requant.len() as u64 == p(&[b.kh, b.kw])?
                };
            ok.then_some((vec![p(&[b.n, b.c, b.h, b.w])?], p(&[b.n, b.c, b.oh, b.ow])?))
        }
        Body::Rescale(b) => positive(&[b.tile_len]).then_some((vec![b.len as u64], b.len as u64)),
        Body::Concat(b) => {
            let ins: Vec<u64> = b
                .parts
                .iter()
                .map(|q| p(&[b.outer, q.inner]))
                .collect::<Option<_>>()?;
            let out = ins.iter().sum();
            Some((ins, out))
        }
        Body::Softmax(b) => {
            (b.lut.len() == 256 && b.k > 0 && b.k < 1 << 62).then_some(())?;
            let n = p(&[b.outer, b.axis_len, b.inner])?;
            Some((vec![n], n))
        }
    }
}

/// The cost model. Compute: convolutions, FC and pooling use the MAC array at `macs`
/// operations per cycle; element-wise commands (ADD, RESHAPE, CLAMP, CONCAT, SOFTMAX) use
/// the element-wise unit at `macs / 8`. Memory: every tile's operands cross the DRAM–SRAM
/// port at 16 bytes per cycle (inputs re-fetched for each channel block, weights for each
/// row band). DMA overlaps compute (double buffering), so a command takes the larger of
/// the two, plus 32 cycles per tile and 16 per command.
pub fn estimate(c: &Command, m: Machine) -> Estimate {
    let macs = m.macs.max(8) as u64;
    let u = |v: u32| v as u64;
    let (tiles, ops, per_cycle, dma) = match &c.body {
        Body::Conv(b) => {
            let dw = c.op == opcode::DEPTHWISE;
            let cpg = if dw { 1 } else { u(b.c) };
            let bands = u(b.oh).div_ceil(u(b.tile_rows).max(1)).max(1);
            let blocks = u(b.m).div_ceil(u(b.tile_ch).max(1)).max(1);
            let in_rows =
                ((u(b.tile_rows) - 1) * u(b.sh) + (u(b.kh) - 1) * u(b.dh) + 1).min(u(b.h));
            let cin = if dw { u(b.tile_ch).min(u(b.c)) } else { u(b.c) };
            let input = bands * blocks * in_rows * u(b.w) * cin;
            let weights = bands * (u(b.m) * cpg * u(b.kh) * u(b.kw) + PARAM_BYTES as u64 * u(b.m));
            let output = u(b.m) * u(b.oh) * u(b.ow);
            let ops = u(b.m) * u(b.oh) * u(b.ow) * cpg * u(b.kh) * u(b.kw);
            let n = u(b.n);
            (
                n * bands * blocks,
                n * ops,
                macs,
                n * (input + weights + output),
            )
        }
        Body::Fc(b) => {
            let bands = u(b.rows).div_ceil(u(b.tile_rows).max(1)).max(1);
            let blocks = u(b.n).div_ceil(u(b.tile_cols).max(1)).max(1);
            let dma = blocks * u(b.rows) * u(b.k)
                + bands * (u(b.n) * u(b.k) + PARAM_BYTES as u64 * u(b.n))
                + u(b.rows) * u(b.n);
            (bands * blocks, u(b.rows) * u(b.n) * u(b.k), macs, dma)
        }
        Body::Pool(b) => {
            let bands = u(b.oh).div_ceil(u(b.tile_rows).max(1)).max(1);
            let planes = u(b.n) * u(b.c);
            // Saturating: a MAXPOOL's window is not bounded by any buffer size.
            let ops = [u(b.oh), u(b.ow), u(b.kh), u(b.kw)]
                .iter()
                .fold(planes, |a, &v| a.saturating_mul(v));
            (
                u(b.n) * bands,
                ops,
                macs,
                planes * (u(b.h) * u(b.w) + u(b.oh) * u(b.ow)),
            )
        }
        Body::Add(b) => (
            u(b.len).div_ceil(u(b.tile_len).max(1)),
            u(b.len),
            macs / 8,
            3 * u(b.len),
        ),
        Body::Rescale(b) => (
            u(b.len).div_ceil(u(b.tile_len).max(1)),
            u(b.len),
            macs / 8,
            2 * u(b.len),
        ),
        Body::Concat(b) => {
            let n: u64 = b.parts.iter().map(|p| u(b.outer) * u(p.inner)).sum();
            (u(b.outer).max(1), n, macs / 8, 2 * n)
        }
        Body::Softmax(b) => {
            let n = u(b.outer) * u(b.axis_len) * u(b.inner);
            (u(b.outer) * u(b.inner), 3 * n, macs / 8, 2 * n + 1024)
        }
    };
    let cycles = ops
        .div_ceil(per_cycle.max(1))
        .max(dma.div_ceil(DRAM_BYTES_PER_CYCLE))
        + TILE_OVERHEAD * tiles
        + COMMAND_OVERHEAD;
    Estimate {
        tiles,
        ops,
        ops_per_cycle: per_cycle,
        dma_bytes: dma,
        cycles,
    }
}

/// Convolution, tile by tile: a band of `tile_rows` output rows for a block of `tile_ch`
/// output channels at a time (the order the hardware would run them in).
fn conv(b: &Conv, depthwise: bool, x: &[i8], y: &mut [i8], clamp: impl Fn(i64) -> i8) {
    let [n, c, h, w, m, oh, ow] = [b.n, b.c, b.h, b.w, b.m, b.oh, b.ow].map(|v| v as usize);
    let [kh, kw, sh, sw, dh, dw, pt, pl] =
        [b.kh, b.kw, b.sh, b.sw, b.dh, b.dw, b.pt, b.pl].map(|v| v as isize);
    let (cpg, mult) = if depthwise { (1, m / c) } else { (c, 1) };
    let (tr, tc) = (b.tile_rows as usize, b.tile_ch as usize);
    for img in 0..n {
        for r0 in (0..oh).step_by(tr) {
            for c0 in (0..m).step_by(tc) {
                for oc in c0..(c0 + tc).min(m) {
                    let wbase = oc * cpg * (kh * kw) as usize;
                    for oy in r0..(r0 + tr).min(oh) {
                        for ox in 0..ow {
                            let mut acc = b.bias[oc] as i64;
                            for ci in 0..cpg {
                                let ic = if depthwise { oc / mult } else { ci };
                                let plane = &x[(img * c + ic) * h * w..][..h * w];
                                let wk = &b.weights[wbase + ci * (kh * kw) as usize..];
                                for ky in 0..kh {
                                    let iy = oy as isize * sh + ky * dh - pt;
                                    if iy < 0 || iy >= h as isize {
                                        continue;
                                    }
                                    for kx in 0..kw {
                                        let ix = ox as isize * sw + kx * dw - pl;
                                        if ix < 0 || ix >= w as isize {
                                            continue;
                                        }
                                        let q = plane[iy as usize * w + ix as usize] as i64;
                                        acc += (q - b.in_zp as i64)
                                            * wk[(ky * kw + kx) as usize] as i64;
                                    }
                                }
                            }
                            y[((img * m + oc) * oh + oy) * ow + ox] =
                                clamp(b.out_zp as i64 + b.requant[oc].apply(acc));
                        }
                    }
                }
            }
        }
    }
}

fn fc(b: &Fc, x: &[i8], y: &mut [i8], clamp: impl Fn(i64) -> i8) {
    let [rows, k, n] = [b.rows, b.k, b.n].map(|v| v as usize);
    let (tr, tc) = (b.tile_rows as usize, b.tile_cols as usize);
    for r0 in (0..rows).step_by(tr) {
        for c0 in (0..n).step_by(tc) {
            for r in r0..(r0 + tr).min(rows) {
                let xr = &x[r * k..][..k];
                for j in c0..(c0 + tc).min(n) {
                    let wr = &b.weights[j * k..][..k];
                    let acc: i64 = xr
                        .iter()
                        .zip(wr)
                        .map(|(&q, &wv)| (q as i64 - b.in_zp as i64) * wv as i64)
                        .sum::<i64>()
                        + b.bias[j] as i64;
                    y[r * n + j] = clamp(b.out_zp as i64 + b.requant[j].apply(acc));
                }
            }
        }
    }
}

fn add(b: &Add, x: &[i8], z: &[i8], y: &mut [i8], clamp: impl Fn(i64) -> i8) {
    for ((o, &p), &q) in y.iter_mut().zip(x).zip(z) {
        let sum = (p as i128 - b.a_zp as i128) * b.a_mult as i128
            + (q as i128 - b.b_zp as i128) * b.b_mult as i128;
        *o = clamp(b.out_zp as i64 + shift_round(sum, b.shift) as i64);
    }
}

fn pool(b: &Pool, max: bool, x: &[i8], y: &mut [i8], clamp: impl Fn(i64) -> i8) {
    let [n, c, h, w, oh, ow] = [b.n, b.c, b.h, b.w, b.oh, b.ow].map(|v| v as usize);
    let [kh, kw, sh, sw, pt, pl, pb, pr] =
        [b.kh, b.kw, b.sh, b.sw, b.pt, b.pl, b.pb, b.pr].map(|v| v as isize);
    for plane in 0..n * c {
        let xs = &x[plane * h * w..][..h * w];
        for r0 in (0..oh).step_by(b.tile_rows as usize) {
            for oy in r0..(r0 + b.tile_rows as usize).min(oh) {
                for ox in 0..ow {
                    let (y0, x0) = (oy as isize * sh - pt, ox as isize * sw - pl);
                    let (mut best, mut sum, mut count) = (i64::MIN, 0i64, 0usize);
                    for iy in y0.max(0)..(y0 + kh).min(h as isize) {
                        for ix in x0.max(0)..(x0 + kw).min(w as isize) {
                            let q = xs[iy as usize * w + ix as usize] as i64;
                            best = best.max(q);
                            sum += q - b.in_zp as i64;
                            count += 1;
                        }
                    }
                    let v = if max {
                        if count == 0 {
                            b.out_zp as i64
                        } else {
                            b.out_zp as i64 + b.requant[0].apply(best - b.in_zp as i64)
                        }
                    } else {
                        if b.count_include_pad != 0 {
                            // Padding counts, but not window cells past the padded input.
                            let ys = (y0.max(-pt)..(y0 + kh).min(h as isize + pb)).len();
                            let xs = (x0.max(-pl)..(x0 + kw).min(w as isize + pr)).len();
                            count = ys * xs;
                        }
                        match count {
                            0 => b.out_zp as i64,
                            k => {
                                b.out_zp as i64
                                    + b.requant[(k - 1).min(b.requant.len() - 1)].apply(sum)
                            }
                        }
                    };
                    y[plane * oh * ow + oy * ow + ox] = clamp(v);
                }
            }
        }
    }
}

fn rescale(b: &Rescale, x: &[i8], y: &mut [i8], clamp: impl Fn(i64) -> i8) {
    for (o, &q) in y.iter_mut().zip(x) {
        *o = clamp(b.out_zp as i64 + b.requant.apply(q as i64 - b.in_zp as i64));
    }
}

fn concat(b: &Concat, ins: &[&[i8]], y: &mut [i8], clamp: impl Fn(i64) -> i8) {
    let mut at = 0;
    for o in 0..b.outer as usize {
        for (p, x) in b.parts.iter().zip(ins) {
            let inner = p.inner as usize;
            for &q in &x[o * inner..][..inner] {
                y[at] = clamp(b.out_zp as i64 + p.requant.apply(q as i64 - p.in_zp as i64));
                at += 1;
            }
        }
    }
}

fn softmax(b: &Softmax, x: &[i8], y: &mut [i8], clamp: impl Fn(i64) -> i8) {
    let [outer, len, inner] = [b.outer, b.axis_len, b.inner].map(|v| v as usize);
    for o in 0..outer {
        for i in 0..inner {
            let at = |a: usize| (o * len + a) * inner + i;
            let top = (0..len).map(|a| x[at(a)]).max().unwrap_or(0) as i32;
            let lut = |a: usize| b.lut[(top - x[at(a)] as i32) as usize] as i128;
            let sum: i128 = (0..len).map(lut).sum();
            if sum == 0 {
                continue;
            }
            for a in 0..len {
                let v = div_round(lut(a) * b.k as i128, sum << 32);
                y[at(a)] = clamp(b.out_zp as i64 + v as i64);
            }
        }
    }
}
