//! The Baton NPU simulator: a delegate that behaves like an integer NPU of the Arm
//! Ethos-U class, so that the framework is exercised the way a real NPU exercises it.
//!
//! Nothing here needs NPU hardware. The point is to have, in every build and in CI, a
//! backend with a real NPU's habits: it takes only statically quantized int8 work, has a
//! narrow op set and an on-chip memory budget, compiles ahead of time into a command
//! stream of its own format, refuses streams it did not write, computes in integers only,
//! and reports what each command cost.
//!
//! # What it runs
//!
//! QDQ groups (recognised in `lower/mod.rs`, checked per op in `lower/groups.rs`):
//! `DequantizeLinear(int8 x) [+ DequantizeLinear(int8 weights) + DequantizeLinear(int32
//! bias)] → op [→ Relu | Clip] → QuantizeLinear(int8)`, where op is Conv (plain or
//! depthwise, 2-D), MatMul or Gemm with constant weights (a following Add of a
//! dequantized int32 constant is the bias), Add of two activations of equal shape,
//! MaxPool, AveragePool, GlobalAveragePool, Relu, Clip, Reshape, Flatten, Concat or
//! Softmax. A Reshape or Flatten between the DequantizeLinear and an FC's MatMul/Gemm is
//! folded into the FC. It claims every node of a group, so its partitions begin and end on int8
//! tensors and the f32 tensors inside a group are folded away. Everything else is
//! declined with a reason: float ops (`dtype`), other ops (`op`), dynamic or oversize
//! shapes (`shape`; extents up to 65536, kernels up to 64, strides up to 3, dilations up
//! to 2), operands that must be constant (`not-constant`), and work whose smallest tile
//! does not fit the SRAM or whose accumulator could overflow 32 bits (`resource`).
//!
//! # Options
//!
//! | option | kind | default | meaning |
//! | --- | --- | --- | --- |
//! | `macs` | int 32..=4096 | 256 | 8-bit multiply-accumulates per cycle (Ethos-U55: 32 to 256, U65: 256 or 512) |
//! | `sram_kib` | int 1..=65536 | 384 | on-chip SRAM for tiles, in KiB |
//! | `clock_mhz` | int 1..=4000 | 500 | clock, for the time estimate |
//! | `present` | bool | true | whether the device is there; `false` (or the environment variable `BATON_NPU_SIM_ABSENT=1`) makes it absent |
//!
//! An absent device has no devices, says it is unavailable, and refuses `compile` and
//! `init`, so the host's probe fails and its work goes to the next backend.
//!
//! # Arithmetic
//!
//! Accumulation is in integers; every command ends with a fixed-point requantization
//! `round_half_away_from_zero(v · m / 2^shift)` (`quant.rs`) and a clamp that also
//! implements a fused Relu or Clip exactly. Softmax uses a 256-entry exponent table and
//! an integer division (`command.rs`, `Softmax`). Against the reference
//! executor (f32/f64 arithmetic, QuantizeLinear rounding half to even) the results agree
//! within one quantization step; most agree exactly.
//!
//! # Tiling and the cycle estimate
//!
//! `compile` splits every convolution, FC and pooling command into tiles whose input
//! rows, weights, per-channel parameters and output fit `sram_kib` (`tiling.rs`), and
//! `execute` runs them tile by tile. Each command's estimated cycle count is
//! `max(ops / rate, dma_bytes / 16) + 32 · tiles + 16`: the MAC array does `macs`
//! operations per cycle for Conv/FC/pooling, the element-wise unit `macs / 8`; every
//! tile's operands cross the DRAM–SRAM port at 16 bytes per cycle, overlapped with
//! compute. The events reach the host through the ABI 1.1 `profile` entry point
//! (`baton run --profile`), with the measured wall time of the simulation beside them.
//!
//! # The command stream format (version 1)
//!
//! All integers little-endian. A blob is a 32-byte header and a payload:
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 4 | magic, the bytes `BNPU` |
//! | 4 | 4 | format version, `1`; any other value is refused at `init` |
//! | 8 | 4 | header length, `32` |
//! | 12 | 4 | flags, `0` (reserved) |
//! | 16 | 4 | command count |
//! | 20 | 4 | payload length in bytes (the blob is exactly header + payload) |
//! | 24 | 4 | CRC-32 (IEEE 802.3) of the whole blob with these four bytes zeroed |
//! | 28 | 4 | reserved, `0` |
//!
//! The payload:
//!
//! 1. The machine the stream was compiled for: `u32 macs, u32 sram_bytes, u32 clock_mhz`.
//!    Tiles fit `sram_bytes`; `init` refuses a stream tiled for more SRAM than it has.
//! 2. The buffer table: `u32 n`, then `n × u32` byte sizes of the int8 buffers.
//! 3. Inputs: `u32 n`, `n × u32` buffer indices, in the partition's input order.
//! 4. Outputs: `u32 n`, `n × u32` buffer indices, in the partition's output order.
//! 5. The commands, `command count` of them, each:
//!    `u16 opcode, u16 0, u32 name_len, name (UTF-8, the IR node), u32 n_in,
//!    n_in × u32 input buffer, u32 output buffer, i32 clamp_lo, i32 clamp_hi`, then the
//!    opcode's body. Opcodes: 1 CONV2D, 2 DEPTHWISE, 3 FC, 4 ADD, 5 AVGPOOL, 6 MAXPOOL,
//!    7 RESHAPE, 8 CLAMP, 9 CONCAT, 10 SOFTMAX. A requantization `rq` is `i32 m, u8 shift`;
//!    a list is `u32 count` then its items.
//!    - CONV2D, DEPTHWISE: `u32 n, c, h, w, m, oh, ow, kh, kw, sh, sw, dh, dw, pad_top,
//!      pad_left; i32 in_zp, out_zp; list i8 weights [m][c or 1][kh][kw]; list i32 bias
//!      (accumulator units); list rq (per output channel); u32 tile_rows, tile_channels`.
//!    - FC: `u32 rows, k, n; i32 in_zp, out_zp; list i8 weights [n][k]; list i32 bias;
//!      list rq; u32 tile_rows, tile_cols`.
//!    - ADD: `u32 len; i32 a_zp, b_zp, a_mult, b_mult; u8 shift; i32 out_zp; u32 tile_len`
//!      (`out = out_zp + round_half_away(((a-a_zp)·a_mult + (b-b_zp)·b_mult) / 2^shift)`).
//!    - AVGPOOL, MAXPOOL: `u32 n, c, h, w, oh, ow, kh, kw, sh, sw, pad_top, pad_left,
//!      pad_bottom, pad_right; u8 count_include_pad; i32 in_zp, out_zp; list rq (MAXPOOL:
//!      one; AVGPOOL: one per window count 1..=kh·kw); u32 tile_rows`.
//!    - RESHAPE, CLAMP: `u32 len; i32 in_zp, out_zp; rq; u32 tile_len`.
//!    - CONCAT: `u32 outer; i32 out_zp; u32 parts; parts × (u32 inner, i32 in_zp, rq)`.
//!    - SOFTMAX: `u32 outer, axis_len, inner; i32 out_zp; list i32 lut (256 entries,
//!      exp(-x_scale·d) in Q30); u64 k = round(2^32 / y_scale)`.
//!
//! `init` checks, in order: magic, version, header length, payload length, checksum,
//! then decodes the payload and checks every command's geometry against its buffers, so
//! a damaged or hand-made stream is refused with an error naming the first problem and
//! never makes the interpreter read out of bounds. Weights travel inside the stream (as
//! on a real NPU, whose DMA reads them from the command stream's memory), so `init` does
//! not need the constant views.

#![warn(missing_docs)]

mod blob;
mod command;
mod error;
mod exec;
mod lower;
mod quant;
mod tiling;

use std::collections::BTreeMap;

use baton_delegate_api::abi::{concurrency, option_kind};
use baton_delegate_api::ir::{DType, Graph, TensorId};
use baton_delegate_api::{
    BlobCompatibility, Constants, Decline, Delegate, DelegateError, Device, OptionDecl, Options,
    PluginInfo, Support, TensorRef,
};

pub use blob::{checksum, Machine, FORMAT_VERSION, HEADER_LEN, MAGIC};
pub use error::NpuError;
pub use exec::{Estimate, NpuExecutable};

use crate::blob::Stream;
use crate::command::Command;

baton_delegate_api::export_delegate!(NpuSimDelegate);

/// The environment variable that switches the device off when set to `1`.
pub const ABSENT_ENV: &str = "BATON_NPU_SIM_ABSENT";

/// The NPU simulator, configured by its options.
#[derive(Debug)]
pub struct NpuSimDelegate {
    machine: Machine,
    present: bool,
}

impl NpuSimDelegate {
    /// The machine this context simulates.
    pub fn machine(&self) -> Machine {
        self.machine
    }

    /// Whether the device is present.
    pub fn present(&self) -> bool {
        self.present
    }

    fn device(&self, device: u32) -> Result<(), NpuError> {
        if !self.present {
            return Err(NpuError::Absent);
        }
        if device != 0 {
            return Err(NpuError::NoSuchDevice(device));
        }
        Ok(())
    }
}

impl Delegate for NpuSimDelegate {
    type Executable = NpuExecutable;

    fn info() -> PluginInfo {
        PluginInfo {
            name: "npu-sim",
            version: env!("CARGO_PKG_VERSION"),
            // The stream format is part of the build id: a new format means new blobs.
            build_id: concat!(env!("CARGO_PKG_VERSION"), "-cs1"),
            features: 0,
            concurrency: concurrency::SERIALIZED_PER_HANDLE,
        }
    }

    fn options() -> Vec<OptionDecl> {
        vec![
            OptionDecl {
                name: "macs",
                kind: option_kind::INT,
                default: "256",
                min: 32.0,
                max: 4096.0,
                choices: "",
                help: "8-bit multiply-accumulates per cycle (Ethos-U55: 32-256, U65: 256/512)",
            },
            OptionDecl {
                name: "sram_kib",
                kind: option_kind::INT,
                default: "384",
                min: 1.0,
                max: 65536.0,
                choices: "",
                help: "on-chip SRAM for tiles, in KiB; every tile must fit",
            },
            OptionDecl {
                name: "clock_mhz",
                kind: option_kind::INT,
                default: "500",
                min: 1.0,
                max: 4000.0,
                choices: "",
                help: "NPU clock in MHz, for time estimates",
            },
            OptionDecl {
                name: "present",
                kind: option_kind::BOOL,
                default: "true",
                min: 0.0,
                max: 0.0,
                choices: "",
                help: "whether the device is present (BATON_NPU_SIM_ABSENT=1 also makes it absent)",
            },
        ]
    }

    fn create(options: &Options) -> Result<Self, DelegateError> {
        let int = |k: &str| {
            options
                .int(k)
                .ok_or_else(|| DelegateError::invalid(format!("npu-sim: option {k} missing")))
        };
        let env_absent = std::env::var(ABSENT_ENV).is_ok_and(|v| v == "1");
        Ok(NpuSimDelegate {
            machine: Machine {
                macs: int("macs")? as u32,
                sram_bytes: (int("sram_kib")? * 1024) as u32,
                clock_mhz: int("clock_mhz")? as u32,
            },
            present: options.bool("present").unwrap_or(true) && !env_absent,
        })
    }

    fn available(&self) -> bool {
        self.present
    }

    fn devices(&self) -> Vec<Device> {
        if !self.present {
            return Vec::new();
        }
        let m = self.machine;
        vec![Device {
            name: format!(
                "npu-sim ({} MACs, {} KiB SRAM, {} MHz)",
                m.macs,
                m.sram_bytes / 1024,
                m.clock_mhz
            ),
            kind: 2,
            driver_version: format!("cs{FORMAT_VERSION}"),
            memory_bytes: m.sram_bytes as u64,
        }]
    }

    fn supports(&self, graph: &Graph, constants: Constants<'_>) -> Vec<Support> {
        lower::analyse(graph, constants, self.machine).answers
    }

    fn compile(
        &self,
        device: u32,
        graph: &Graph,
        constants: Constants<'_>,
    ) -> Result<Vec<u8>, DelegateError> {
        self.device(device)?;
        Ok(lower_stream(graph, constants, self.machine)?.encode())
    }

    fn blob_compatibility(&self, blob: &[u8]) -> BlobCompatibility {
        match Stream::decode(blob) {
            Err(_) => BlobCompatibility::Unsupported,
            Ok(s) if s.machine.sram_bytes > self.machine.sram_bytes => {
                BlobCompatibility::Unsupported
            }
            // It runs, but a compile for this NPU would tile differently.
            Ok(s) if s.machine != self.machine => BlobCompatibility::PreferRecompile,
            Ok(_) => BlobCompatibility::Optimal,
        }
    }

    fn init(
        &self,
        device: u32,
        blob: &[u8],
        _constants: &[TensorRef<'_>],
    ) -> Result<NpuExecutable, DelegateError> {
        self.device(device)?;
        let stream = Stream::decode(blob)?;
        if stream.machine.sram_bytes > self.machine.sram_bytes {
            return Err(NpuError::Sram {
                blob_kib: stream.machine.sram_bytes / 1024,
                ours_kib: self.machine.sram_bytes / 1024,
            }
            .into());
        }
        Ok(NpuExecutable::new(stream, self.machine)?)
    }
}

/// Lowers a subgraph whose every node belongs to a group into a stream.
fn lower_stream(g: &Graph, c: Constants<'_>, machine: Machine) -> Result<Stream, NpuError> {
    let analysis = lower::analyse(g, c, machine);
    if let Some((node, Support::No(Decline { message, .. }))) = g
        .nodes
        .iter()
        .zip(&analysis.answers)
        .find(|(_, a)| **a != Support::Yes)
    {
        return Err(NpuError::Unsupported(format!(
            "node {} cannot run on the NPU: {message}",
            node.label()
        )));
    }
    let mut buffers: Vec<u32> = Vec::new();
    let mut index: BTreeMap<TensorId, u32> = BTreeMap::new();
    let mut buffer = |t: TensorId| -> Result<u32, NpuError> {
        if let Some(&b) = index.get(&t) {
            return Ok(b);
        }
        let d = &g.tensors[t];
        let shape = d.static_shape().filter(|_| d.dtype == DType::I8).ok_or_else(|| {
            NpuError::Unsupported(format!(
                "tensor {} crosses the partition boundary as {}; the NPU exchanges only int8 tensors of fixed shape",
                d.name, d.dtype
            ))
        })?;
        let b = buffers.len() as u32;
        buffers.push(shape.iter().product::<usize>() as u32);
        index.insert(t, b);
        Ok(b)
    };
    let inputs = g
        .inputs
        .iter()
        .map(|&t| buffer(t))
        .collect::<Result<Vec<_>, _>>()?;
    let mut commands = Vec::new();
    for gr in &analysis.groups {
        let ins = gr
            .inputs
            .iter()
            .map(|&t| buffer(t))
            .collect::<Result<Vec<_>, _>>()?;
        let output = buffer(gr.output)?;
        commands.push(Command {
            op: gr.op,
            name: g.nodes[gr.anchor].label(),
            inputs: ins,
            output,
            lo: gr.lo,
            hi: gr.hi,
            body: gr.body.clone(),
        });
    }
    let outputs = g
        .outputs
        .iter()
        .map(|&t| buffer(t))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Stream {
        machine,
        buffers,
        inputs,
        outputs,
        commands,
    })
}
