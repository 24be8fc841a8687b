//! IEEE behaviour asked of the driver by SPIR-V execution modes (SPV_KHR_float_controls).
//!
//! Without them a driver may flush f32 subnormals to zero and assume no NaN or infinity
//! exists. NVIDIA's does both: on an H200 (driver 580) the kit saw `select(x, 0, x < 0)`
//! turned into `max(x, 0)` (Relu and Clip of NaN gave a number), a subnormal times a
//! large number give NaN (the subnormal read as 0, times inf), and `log` of a negative
//! subnormal give -inf, not NaN. The host reference keeps IEEE semantics, so the kernels
//! must too. naga's SPIR-V writer has no option for these modes, so they are added to
//! its output here, before the module is created, on devices whose float-controls
//! properties say they honour them (Vulkan 1.2, or `VK_KHR_shader_float_controls`).

/// The 32-bit float behaviour a device can be asked to keep.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FloatControls {
    /// `DenormPreserve` for 32-bit floats (shaderDenormPreserveFloat32).
    pub denorm_preserve: bool,
    /// `SignedZeroInfNanPreserve` for 32-bit floats
    /// (shaderSignedZeroInfNanPreserveFloat32).
    pub nan_preserve: bool,
}

impl FloatControls {
    pub fn any(self) -> bool {
        self.denorm_preserve || self.nan_preserve
    }
}

const OP_EXTENSION: u32 = 10;
const OP_ENTRY_POINT: u32 = 15;
const OP_EXECUTION_MODE: u32 = 16;
const OP_CAPABILITY: u32 = 17;
const CAP_DENORM_PRESERVE: u32 = 4464;
const CAP_SIGNED_ZERO_INF_NAN_PRESERVE: u32 = 4466;
const MODE_DENORM_PRESERVE: u32 = 4459;
const MODE_SIGNED_ZERO_INF_NAN_PRESERVE: u32 = 4461;
const HEADER_WORDS: usize = 5;

/// `words` (a SPIR-V module) with the capabilities, the `SPV_KHR_float_controls`
/// extension and, for every entry point, the execution modes `controls` asks for, at
/// 32 bits. The module is returned unchanged when nothing is asked or it is not a
/// well-formed instruction stream (the driver then reports the fault as before).
pub(crate) fn with_float_controls(words: &[u32], controls: FloatControls) -> Vec<u32> {
    let Some(instructions) = instructions(words) else {
        return words.to_vec();
    };
    if !controls.any() {
        return words.to_vec();
    }
    let mut caps = Vec::new();
    let mut modes = Vec::new();
    if controls.denorm_preserve {
        caps.push(CAP_DENORM_PRESERVE);
        modes.push(MODE_DENORM_PRESERVE);
    }
    if controls.nan_preserve {
        caps.push(CAP_SIGNED_ZERO_INF_NAN_PRESERVE);
        modes.push(MODE_SIGNED_ZERO_INF_NAN_PRESERVE);
    }
    // Capabilities open the module and the extensions follow them; the execution modes
    // follow the entry points (the logical layout of SPIR-V's section 2.4).
    let last_cap = instructions
        .iter()
        .rposition(|&(op, _)| op == OP_CAPABILITY)
        .map_or(0, |i| i + 1);
    let last_entry = instructions
        .iter()
        .rposition(|&(op, _)| op == OP_ENTRY_POINT);
    let Some(last_entry) = last_entry else {
        return words.to_vec();
    };
    let entries: Vec<u32> = instructions
        .iter()
        .filter(|&&(op, _)| op == OP_ENTRY_POINT)
        .filter_map(|&(_, at)| words.get(at + 2).copied())
        .collect();
    let mut out = Vec::with_capacity(words.len() + 32);
    out.extend_from_slice(&words[..HEADER_WORDS]);
    for (k, &(_, at)) in instructions.iter().enumerate() {
        if k == last_cap {
            for &c in &caps {
                out.extend_from_slice(&[2 << 16 | OP_CAPABILITY, c]);
            }
            out.extend(extension("SPV_KHR_float_controls"));
        }
        let len = (words[at] >> 16) as usize;
        out.extend_from_slice(&words[at..at + len]);
        if k == last_entry {
            for &e in &entries {
                for &m in &modes {
                    out.extend_from_slice(&[4 << 16 | OP_EXECUTION_MODE, e, m, 32]);
                }
            }
        }
    }
    out
}

/// (opcode, word offset) of every instruction after the header; `None` when a word
/// count is zero or runs past the end.
fn instructions(words: &[u32]) -> Option<Vec<(u32, usize)>> {
    if words.len() < HEADER_WORDS || words[0] != 0x0723_0203 {
        return None;
    }
    let mut at = HEADER_WORDS;
    let mut found = Vec::new();
    while at < words.len() {
        let len = (words[at] >> 16) as usize;
        if len == 0 || at + len > words.len() {
            return None;
        }
        found.push((words[at] & 0xffff, at));
        at += len;
    }
    Some(found)
}

/// An `OpExtension` instruction naming `name` (a nul-terminated UTF-8 literal, padded
/// to whole words).
fn extension(name: &str) -> Vec<u32> {
    let mut bytes = name.as_bytes().to_vec();
    bytes.push(0);
    while !bytes.len().is_multiple_of(4) {
        bytes.push(0);
    }
    let mut out = vec![((1 + bytes.len() / 4) as u32) << 16 | OP_EXTENSION];
    out.extend(
        bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(kernel: &str, value: u32) -> Vec<u32> {
        let bytes = crate::kernels::spirv(kernel, value).expect("built");
        bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    /// An instruction as (opcode, operand words).
    type Inst = (u32, Vec<u32>);

    fn ops(words: &[u32]) -> Vec<Inst> {
        instructions(words)
            .expect("well formed")
            .into_iter()
            .map(|(op, at)| (op, words[at + 1..at + (words[at] >> 16) as usize].to_vec()))
            .collect()
    }

    #[test]
    fn modes_are_added_in_their_sections_for_every_entry_point() {
        let before = module("elementwise", 64);
        let both = FloatControls {
            denorm_preserve: true,
            nan_preserve: true,
        };
        let after = with_float_controls(&before, both);
        let got = ops(&after);
        let pos = |want: &dyn Fn(&Inst) -> bool| got.iter().position(want);
        let cap_d = pos(&|(op, a)| *op == OP_CAPABILITY && a == &[CAP_DENORM_PRESERVE]);
        let cap_n =
            pos(&|(op, a)| *op == OP_CAPABILITY && a == &[CAP_SIGNED_ZERO_INF_NAN_PRESERVE]);
        let ext = pos(&|(op, _)| *op == OP_EXTENSION).expect("extension");
        let entry = pos(&|(op, _)| *op == OP_ENTRY_POINT).expect("entry point");
        let main = got[entry].1[1];
        let mode_d =
            pos(&|(op, a)| *op == OP_EXECUTION_MODE && a == &[main, MODE_DENORM_PRESERVE, 32])
                .expect("denorm mode");
        let mode_n = pos(&|(op, a)| {
            *op == OP_EXECUTION_MODE && a == &[main, MODE_SIGNED_ZERO_INF_NAN_PRESERVE, 32]
        })
        .expect("nan mode");
        // Every capability before the extension, the extension before the entry point,
        // the modes after it and before the first non-mode instruction that follows.
        let last_cap = got
            .iter()
            .rposition(|(op, _)| *op == OP_CAPABILITY)
            .unwrap();
        assert!(cap_d.unwrap() <= last_cap && cap_n.unwrap() <= last_cap);
        assert!(last_cap < ext && ext < entry && entry < mode_d.min(mode_n));
        let bytes = &got[ext].1;
        let name: Vec<u8> = bytes.iter().flat_map(|w| w.to_le_bytes()).collect();
        assert!(name.starts_with(b"SPV_KHR_float_controls\0"));
        // Nothing else changed: the new module is the old one plus exactly these
        // instructions (2 + 2 capability words, 7 extension words, 2 × 4 mode words).
        assert_eq!(after.len(), before.len() + 4 + 7 + 8);
        let old = ops(&before);
        let kept: Vec<_> = got
            .iter()
            .enumerate()
            .filter(|(i, _)| ![cap_d.unwrap(), cap_n.unwrap(), ext, mode_d, mode_n].contains(i))
            .map(|(_, x)| x.clone())
            .collect();
        assert_eq!(kept, old);
    }

    #[test]
    fn one_mode_alone_and_nothing_asked_or_malformed_input_leave_the_module_alone() {
        let before = module("matmul_f16", 8);
        let only_nan = FloatControls {
            denorm_preserve: false,
            nan_preserve: true,
        };
        let after = with_float_controls(&before, only_nan);
        assert_eq!(after.len(), before.len() + 2 + 7 + 4);
        assert!(!ops(&after)
            .iter()
            .any(|(op, a)| *op == OP_CAPABILITY && a == &[CAP_DENORM_PRESERVE]));
        assert_eq!(
            with_float_controls(&before, FloatControls::default()),
            before
        );
        // An instruction whose word count runs past the end of the module.
        let mut cut = before.clone();
        cut.push(5 << 16 | 1);
        assert_eq!(with_float_controls(&cut, only_nan), cut);
        assert_eq!(with_float_controls(&[1, 2, 3], only_nan), vec![1, 2, 3]);
    }
}
