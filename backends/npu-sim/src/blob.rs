//! The command stream container: header, machine record, buffer table, commands, CRC.
//!
//! The layout is documented field by field in the crate documentation (`lib.rs`), which
//! is what vendors and tools read; this module is its only writer and reader.

use baton_delegate_api::bytes::{ByteReader, ByteWriter};

use crate::command::Command;
use crate::error::NpuError;

/// `"BNPU"`: the first four bytes of every stream.
pub const MAGIC: [u8; 4] = *b"BNPU";
/// The format version this build writes and the only one it reads.
pub const FORMAT_VERSION: u32 = 1;
/// Bytes in the header.
pub const HEADER_LEN: usize = 32;
/// Offset of the CRC field in the header.
const CRC_AT: usize = 24;

/// The NPU a stream was compiled for: its tiles fit `sram_bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Machine {
    /// 8-bit multiply-accumulates per cycle.
    pub macs: u32,
    /// On-chip SRAM in bytes.
    pub sram_bytes: u32,
    /// Clock in MHz.
    pub clock_mhz: u32,
}

/// A decoded stream.
#[derive(Clone, Debug, PartialEq)]
pub struct Stream {
    /// The machine it was compiled for.
    pub machine: Machine,
    /// Byte size of every int8 buffer.
    pub buffers: Vec<u32>,
    /// The buffers the partition's inputs are copied into, in input order.
    pub inputs: Vec<u32>,
    /// The buffers the partition's outputs are read from, in output order.
    pub outputs: Vec<u32>,
    /// The commands, in execution order.
    pub commands: Vec<Command>,
}

impl Stream {
    /// Serializes the stream with its header and checksum.
    pub fn encode(&self) -> Vec<u8> {
        let mut p = ByteWriter::new();
        p.u32(self.machine.macs);
        p.u32(self.machine.sram_bytes);
        p.u32(self.machine.clock_mhz);
        for list in [&self.buffers, &self.inputs, &self.outputs] {
            p.u32(list.len() as u32);
            list.iter().for_each(|&v| p.u32(v));
        }
        self.commands.iter().for_each(|c| c.write(&mut p));
        let mut h = ByteWriter::new();
        h.bytes(&MAGIC);
        h.u32(FORMAT_VERSION);
        h.u32(HEADER_LEN as u32);
        h.u32(0); // flags
        h.u32(self.commands.len() as u32);
        h.u32(p.len() as u32);
        h.u32(0); // crc, filled below
        h.u32(0); // reserved
        let mut out = h.finish();
        out.extend_from_slice(&p.finish());
        let crc = checksum(&out);
        out[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Checks the header and checksum and decodes the stream.
    pub fn decode(blob: &[u8]) -> Result<Stream, NpuError> {
        let header = check_header(blob)?;
        Stream::decode_payload(&blob[HEADER_LEN..], header.commands).map_err(NpuError::Malformed)
    }

    /// The payload after a valid header: every error is the text of a `Malformed`.
    fn decode_payload(payload: &[u8], commands: u32) -> Result<Stream, String> {
        let mut r = ByteReader::new(payload);
        let machine = Machine {
            macs: r.u32("machine record")?,
            sram_bytes: r.u32("machine record")?,
            clock_mhz: r.u32("machine record")?,
        };
        let mut lists = Vec::new();
        for what in ["buffer table", "input list", "output list"] {
            let n = r.count_u32(4, what)?;
            let l: Vec<u32> = (0..n).map(|_| r.u32(what)).collect::<Result<_, _>>()?;
            lists.push(l);
        }
        let commands = (0..commands)
            .map(|i| Command::read(&mut r).map_err(|e| format!("command {i}: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        if r.left() != 0 {
            return Err(format!("{} bytes left after the last command", r.left()));
        }
        let outputs = lists.pop().expect("3 lists");
        let inputs = lists.pop().expect("3 lists");
        let buffers = lists.pop().expect("3 lists");
        Ok(Stream {
            machine,
            buffers,
            inputs,
            outputs,
            commands,
        })
    }
}

/// What the header says, once magic, version, lengths and checksum are right.
pub struct Header {
    /// The number of commands.
    pub commands: u32,
}

/// Validates magic, version, header length, payload length and checksum, in that order,
/// so the error names the first thing wrong.
pub fn check_header(blob: &[u8]) -> Result<Header, NpuError> {
    if blob.len() < HEADER_LEN || blob[..4] != MAGIC {
        return Err(NpuError::NotAStream);
    }
    let u32_at = |i: usize| u32::from_le_bytes(blob[i..i + 4].try_into().expect("4 bytes"));
    let version = u32_at(4);
    if version != FORMAT_VERSION {
        return Err(NpuError::Version {
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    let header_len = u32_at(8) as usize;
    if header_len != HEADER_LEN {
        return Err(NpuError::Malformed(format!(
            "header length {header_len}, version {FORMAT_VERSION} has {HEADER_LEN}"
        )));
    }
    let payload = u32_at(20) as usize;
    if blob.len() != HEADER_LEN + payload {
        return Err(NpuError::Malformed(format!(
            "the header announces {payload} payload bytes, the blob has {}",
            blob.len() - HEADER_LEN
        )));
    }
    let stored = u32_at(CRC_AT);
    let mut copy = blob.to_vec();
    copy[CRC_AT..CRC_AT + 4].fill(0);
    let computed = checksum(&copy);
    if stored != computed {
        return Err(NpuError::Checksum { stored, computed });
    }
    Ok(Header {
        commands: u32_at(16),
    })
}

/// CRC-32 (IEEE 802.3: reflected polynomial 0xEDB88320, initial value and final xor
/// 0xFFFFFFFF; the check value of `"123456789"` is 0xCBF43926), written here by hand
/// because a backend depends on `baton-delegate-api` alone (see ARCHITECTURE.md), and
/// thirty lines do not justify a dependency every vendor build would inherit.
pub fn checksum(bytes: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut t = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut c = i as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
                k += 1;
            }
            t[i] = c;
            i += 1;
        }
        t
    };
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc = TABLE[((crc ^ b as u32) & 0xFF) as usize] ^ (crc >> 8);
    }
    crc ^ 0xFFFF_FFFF
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::command::{opcode, Body, Rescale};
    use crate::quant::Requant;

    fn sample() -> Stream {
        Stream {
            machine: Machine {
                macs: 256,
                sram_bytes: 384 * 1024,
                clock_mhz: 500,
            },
            buffers: vec![12, 12],
            inputs: vec![0],
            outputs: vec![1],
            commands: vec![Command {
                op: opcode::RESHAPE,
                name: "reshape_1 (Reshape)".into(),
                inputs: vec![0],
                output: 1,
                lo: -128,
                hi: 127,
                body: Body::Rescale(Rescale {
                    len: 12,
                    in_zp: 3,
                    out_zp: -1,
                    requant: Requant::from_real(0.75).unwrap(),
                    tile_len: 4096,
                }),
            }],
        }
    }

    #[test]
    fn streams_round_trip_and_the_header_is_as_documented() {
        let s = sample();
        let blob = s.encode();
        assert_eq!(Stream::decode(&blob).unwrap(), s);
        assert_eq!(&blob[0..4], b"BNPU");
        let u32_at = |i: usize| u32::from_le_bytes(blob[i..i + 4].try_into().unwrap());
        assert_eq!(u32_at(4), FORMAT_VERSION);
        assert_eq!(u32_at(8), HEADER_LEN as u32);
        assert_eq!(u32_at(12), 0);
        assert_eq!(u32_at(16), 1);
        assert_eq!(u32_at(20) as usize, blob.len() - HEADER_LEN);
        assert_eq!(u32_at(28), 0);
        // Truncation anywhere is refused, never a panic.
        for n in 0..blob.len() {
            assert!(Stream::decode(&blob[..n]).is_err());
        }
    }

    /// A stream with one command of every body kind, each field a distinct value.
    fn every_body() -> Stream {
        use crate::command::{Add, Concat, ConcatPart, Conv, Fc, Pool, Softmax};
        let rq = |x: f64| Requant::from_real(x).unwrap();
        let cmd = |op, name: &str, inputs: Vec<u32>, output, body| Command {
            op,
            name: name.into(),
            inputs,
            output,
            lo: -120,
            hi: 100,
            body,
        };
        Stream {
            machine: Machine {
                macs: 512,
                sram_bytes: 256 * 1024,
                clock_mhz: 800,
            },
            buffers: vec![48, 32, 32, 16, 16, 8, 40, 40],
            inputs: vec![0],
            outputs: vec![7],
            commands: vec![
                cmd(
                    opcode::CONV2D,
                    "conv (Conv)",
                    vec![0],
                    1,
                    Body::Conv(Conv {
                        n: 1,
                        c: 3,
                        h: 4,
                        w: 4,
                        m: 2,
                        oh: 4,
                        ow: 4,
                        kh: 3,
                        kw: 1,
                        sh: 1,
                        sw: 2,
                        dh: 3,
                        dw: 1,
                        pt: 1,
                        pl: 0,
                        in_zp: -5,
                        out_zp: 7,
                        weights: (0..18).map(|i| i as i8 - 9).collect(),
                        bias: vec![-1000, 70000],
                        requant: vec![rq(0.01), rq(0.3)],
                        tile_rows: 2,
                        tile_ch: 1,
                    }),
                ),
                cmd(
                    opcode::FC,
                    "fc (Gemm)",
                    vec![1],
                    2,
                    Body::Fc(Fc {
                        rows: 2,
                        k: 3,
                        n: 2,
                        in_zp: 1,
                        out_zp: -2,
                        weights: vec![1, -2, 3, -4, 5, -6],
                        bias: vec![9, -9],
                        requant: vec![rq(0.5), rq(0.25)],
                        tile_rows: 1,
                        tile_cols: 2,
                    }),
                ),
                cmd(
                    opcode::ADD,
                    "add (Add)",
                    vec![1, 2],
                    3,
                    Body::Add(Add {
                        len: 16,
                        a_zp: 3,
                        b_zp: -4,
                        a_mult: 1 << 20,
                        b_mult: 3 << 19,
                        shift: 21,
                        out_zp: 5,
                        tile_len: 8,
                    }),
                ),
                cmd(
                    opcode::AVGPOOL,
                    "pool (AveragePool)",
                    vec![3],
                    4,
                    Body::Pool(Pool {
                        n: 1,
                        c: 1,
                        h: 4,
                        w: 4,
                        oh: 2,
                        ow: 2,
                        kh: 3,
                        kw: 3,
                        sh: 2,
                        sw: 2,
                        pt: 1,
                        pl: 1,
                        pb: 0,
                        pr: 0,
                        count_include_pad: 1,
                        in_zp: -1,
                        out_zp: 2,
                        requant: (1..=9).map(|c| rq(1.0 / c as f64)).collect(),
                        tile_rows: 2,
                    }),
                ),
                cmd(
                    opcode::CLAMP,
                    "relu (Relu)",
                    vec![4],
                    5,
                    Body::Rescale(Rescale {
                        len: 8,
                        in_zp: 0,
                        out_zp: -128,
                        requant: rq(1.5),
                        tile_len: 8,
                    }),
                ),
                cmd(
                    opcode::CONCAT,
                    "cat (Concat)",
                    vec![4, 5],
                    6,
                    Body::Concat(Concat {
                        outer: 2,
                        out_zp: 1,
                        parts: vec![
                            ConcatPart {
                                inner: 8,
                                in_zp: 2,
                                requant: rq(0.9),
                            },
                            ConcatPart {
                                inner: 12,
                                in_zp: -3,
                                requant: rq(1.1),
                            },
                        ],
                    }),
                ),
                cmd(
                    opcode::SOFTMAX,
                    "softmax (Softmax)",
                    vec![6],
                    7,
                    Body::Softmax(Softmax {
                        outer: 2,
                        axis_len: 20,
                        inner: 1,
                        out_zp: -128,
                        lut: (0..256).map(|d| (1 << 30) >> (d / 8)).collect(),
                        k: 1 << 40,
                    }),
                ),
            ],
        }
    }

    /// The encoding is the format: these bytes were produced by the stream writer before
    /// it moved onto the SDK's `ByteWriter`, and a blob compiled then must still load.
    #[test]
    fn every_body_kind_encodes_to_the_format_version_1_bytes() {
        let s = every_body();
        let blob = s.encode();
        assert_eq!((blob.len(), checksum(&blob)), (1833, 0x5501_9771));
        assert_eq!(Stream::decode(&blob).unwrap(), s);
    }

    /// A command cut anywhere is an error naming the field it ran out in, never a panic.
    #[test]
    fn commands_cut_short_are_refused_naming_the_field() {
        for c in every_body().commands {
            let mut w = ByteWriter::new();
            c.write(&mut w);
            let bytes = w.finish();
            assert_eq!(Command::read(&mut ByteReader::new(&bytes)).unwrap(), c);
            for n in 0..bytes.len() {
                let e = Command::read(&mut ByteReader::new(&bytes[..n])).unwrap_err();
                assert!(
                    e.starts_with("truncated at byte "),
                    "{} at {n}: {e}",
                    c.name
                );
            }
        }
        // The conv geometry follows 4 bytes of opcode, 4 + 11 of name, 4 + 4 of inputs, 4 of
        // output and 8 of clamp.
        let mut w = ByteWriter::new();
        every_body().commands[0].write(&mut w);
        let e = Command::read(&mut ByteReader::new(&w.finish()[..41])).unwrap_err();
        assert_eq!(
            e,
            "truncated at byte 39 reading the conv geometry (4 bytes needed, 2 left)"
        );
    }

    /// A header announcing more commands than the payload holds (checksum made right) is
    /// refused with the command and the field that ran out.
    #[test]
    fn a_missing_command_is_named() {
        let mut blob = every_body().encode();
        blob[16..20].copy_from_slice(&8u32.to_le_bytes());
        blob[CRC_AT..CRC_AT + 4].fill(0);
        let crc = checksum(&blob);
        blob[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
        let e = Stream::decode(&blob).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "malformed command stream: command 7: truncated at byte {} reading the opcode \
                 (2 bytes needed, 0 left)",
                blob.len() - HEADER_LEN
            )
        );
    }

    #[test]
    fn crc32_check_value() {
        assert_eq!(checksum(b"123456789"), 0xCBF4_3926);
        assert_eq!(checksum(b""), 0);
    }
}
