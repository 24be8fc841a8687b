//! A plugin file checked as an ELF shared object before `dlopen` sees it.
//!
//! glibc's loader trusts the program headers: it maps every `PT_LOAD` segment from the
//! file and touches it, so a truncated library (a copy cut short, a full disk) ends the
//! host with SIGBUS inside `dlopen`, where no error can be returned. The host reads the
//! file anyway (for its sha256), so it checks first what the loader will rely on: the ELF
//! identification (class, byte order, type, machine) against this process, and that the
//! program header table and every `PT_LOAD` segment's file range lie inside the file.
//!
//! Parsed by hand rather than with `object` or `goblin`: the loader relies on some forty
//! bytes of header and a table of fixed-size records, which is less code than the
//! dependency's configuration, and the host crate stays free of a parser it would use for
//! one check. Both classes and both byte orders are parsed, so the reason given for a
//! foreign library is exact.

/// What the loader relies on, read from an ELF file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ElfInfo {
    pub bits: u8,
    pub little_endian: bool,
    pub elf_type: u16,
    pub machine: u16,
    /// `(file offset, file size)` of every `PT_LOAD` segment.
    pub loads: Vec<(u64, u64)>,
}

const ET_DYN: u16 = 3;
const PT_LOAD: u32 = 1;
const PN_XNUM: u16 = 0xffff;

/// Why `bytes`, a whole file, cannot be a shared library this process can load, or `Ok`.
#[cfg(test)]
pub(crate) fn check(bytes: &[u8]) -> Result<(), String> {
    check_head(bytes, bytes.len() as u64)
}

/// [`check`] on the first bytes of a file of `file_len` bytes (the host streams the rest
/// through the hash without holding it). A program header table that lies past `head`
/// but inside the file is refused with its own reason: no linker writes one there.
pub(crate) fn check_head(head: &[u8], file_len: u64) -> Result<(), String> {
    let elf = parse(head, file_len)?;
    let bits = if cfg!(target_pointer_width = "64") {
        64
    } else {
        32
    };
    if elf.bits != bits {
        return Err(format!(
            "a {}-bit ELF file; this host is {bits}-bit",
            elf.bits
        ));
    }
    if elf.little_endian != cfg!(target_endian = "little") {
        return Err(format!(
            "a {}-endian ELF file; this host is {}-endian",
            if elf.little_endian { "little" } else { "big" },
            if cfg!(target_endian = "little") {
                "little"
            } else {
                "big"
            }
        ));
    }
    if elf.elf_type != ET_DYN {
        return Err(format!(
            "ELF type {} is not a shared object (ET_DYN, 3)",
            elf.elf_type
        ));
    }
    if let Some(host) = host_machine() {
        if elf.machine != host {
            return Err(format!(
                "built for ELF machine {}, this host is machine {host} ({})",
                elf.machine,
                std::env::consts::ARCH
            ));
        }
    }
    let len = file_len;
    for (k, &(offset, size)) in elf.loads.iter().enumerate() {
        match offset.checked_add(size) {
            Some(end) if end <= len => {}
            _ => {
                return Err(format!(
                    "PT_LOAD segment {k} spans bytes {offset}..{} but the file has {len}: the file is truncated or corrupt",
                    offset as u128 + size as u128
                ))
            }
        }
    }
    if elf.loads.is_empty() {
        return Err("no PT_LOAD segment: nothing to load".into());
    }
    Ok(())
}

/// Reads the identification, the header fields and the `PT_LOAD` entries from `bytes`,
/// the first bytes of a file of `file_len` bytes.
pub(crate) fn parse(bytes: &[u8], file_len: u64) -> Result<ElfInfo, String> {
    if bytes.len() < 16 || &bytes[..4] != b"\x7fELF" {
        return Err("not an ELF file (no \\x7fELF magic)".into());
    }
    let bits = match bytes[4] {
        1 => 32,
        2 => 64,
        c => return Err(format!("unknown ELF class {c}")),
    };
    let little_endian = match bytes[5] {
        1 => true,
        2 => false,
        d => return Err(format!("unknown ELF byte order {d}")),
    };
    let r = Reader {
        bytes,
        little_endian,
    };
    let truncated = |what: &str| format!("the file ends inside the {what}");
    // (e_phoff, e_phentsize, e_phnum) and the smallest program header of this class.
    let (phoff, phentsize, phnum, min_entry) = if bits == 64 {
        (
            r.u64(32).ok_or_else(|| truncated("ELF header"))?,
            r.u16(54).ok_or_else(|| truncated("ELF header"))?,
            r.u16(56).ok_or_else(|| truncated("ELF header"))?,
            56,
        )
    } else {
        (
            u64::from(r.u32(28).ok_or_else(|| truncated("ELF header"))?),
            r.u16(42).ok_or_else(|| truncated("ELF header"))?,
            r.u16(44).ok_or_else(|| truncated("ELF header"))?,
            32,
        )
    };
    let elf_type = r.u16(16).ok_or_else(|| truncated("ELF header"))?;
    let machine = r.u16(18).ok_or_else(|| truncated("ELF header"))?;
    if phnum == PN_XNUM {
        return Err("more program headers than e_phnum holds (PN_XNUM)".into());
    }
    if phnum > 0 && usize::from(phentsize) < min_entry {
        return Err(format!(
            "program header entries of {phentsize} bytes, under the {min_entry} of ELF{bits}"
        ));
    }
    let table_end = u64::from(phnum)
        .checked_mul(u64::from(phentsize))
        .and_then(|n| n.checked_add(phoff));
    match table_end {
        Some(end) if end <= bytes.len() as u64 => {}
        Some(end) if end <= file_len => {
            return Err(format!(
                "the program header table ends at byte {end}, past the first {} bytes where \
                 linkers put it",
                bytes.len()
            ))
        }
        _ => return Err(truncated("program header table")),
    }
    let mut loads = Vec::new();
    for k in 0..usize::from(phnum) {
        // In bounds: the whole table was checked above.
        let at = phoff as usize + k * usize::from(phentsize);
        let p_type = r.u32(at).ok_or_else(|| truncated("program header table"))?;
        if p_type != PT_LOAD {
            continue;
        }
        let (offset, filesz) = if bits == 64 {
            (r.u64(at + 8), r.u64(at + 32))
        } else {
            (r.u32(at + 4).map(u64::from), r.u32(at + 16).map(u64::from))
        };
        match (offset, filesz) {
            (Some(o), Some(s)) => loads.push((o, s)),
            _ => return Err(truncated("program header table")),
        }
    }
    Ok(ElfInfo {
        bits,
        little_endian,
        elf_type,
        machine,
        loads,
    })
}

/// `e_machine` of this process's architecture, where known.
fn host_machine() -> Option<u16> {
    Some(match std::env::consts::ARCH {
        "x86" => 3,
        "x86_64" => 62,
        "arm" => 40,
        "aarch64" => 183,
        "riscv32" | "riscv64" => 243,
        "powerpc" => 20,
        "powerpc64" => 21,
        "s390x" => 22,
        "mips" | "mips64" => 8,
        "loongarch64" => 258,
        _ => return None,
    })
}

struct Reader<'a> {
    bytes: &'a [u8],
    little_endian: bool,
}

impl Reader<'_> {
    fn array<const N: usize>(&self, at: usize) -> Option<[u8; N]> {
        self.bytes.get(at..at.checked_add(N)?)?.try_into().ok()
    }
    fn u16(&self, at: usize) -> Option<u16> {
        let a = self.array(at)?;
        Some(if self.little_endian {
            u16::from_le_bytes(a)
        } else {
            u16::from_be_bytes(a)
        })
    }
    fn u32(&self, at: usize) -> Option<u32> {
        let a = self.array(at)?;
        Some(if self.little_endian {
            u32::from_le_bytes(a)
        } else {
            u32::from_be_bytes(a)
        })
    }
    fn u64(&self, at: usize) -> Option<u64> {
        let a = self.array(at)?;
        Some(if self.little_endian {
            u64::from_le_bytes(a)
        } else {
            u64::from_be_bytes(a)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF file: header, one PT_LOAD of `filesz` bytes at `offset`, and a
    /// PT_DYNAMIC, in the given class and byte order.
    fn forge(bits: u8, little: bool, machine: u16, offset: u64, filesz: u64) -> Vec<u8> {
        let (ehsize, phentsize) = if bits == 64 { (64, 56) } else { (52, 32) };
        let mut b = vec![0u8; ehsize + 2 * phentsize];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = if bits == 64 { 2 } else { 1 };
        b[5] = if little { 1 } else { 2 };
        b[6] = 1;
        let put = |b: &mut Vec<u8>, at: usize, v: u64, n: usize| {
            let le = v.to_le_bytes();
            for i in 0..n {
                b[at + i] = if little { le[i] } else { le[n - 1 - i] };
            }
        };
        put(&mut b, 16, u64::from(ET_DYN), 2);
        put(&mut b, 18, u64::from(machine), 2);
        let ph = ehsize;
        if bits == 64 {
            put(&mut b, 32, ph as u64, 8);
            put(&mut b, 54, phentsize as u64, 2);
            put(&mut b, 56, 2, 2);
            put(&mut b, ph, 2, 4); // PT_DYNAMIC first
            put(&mut b, ph + phentsize, u64::from(PT_LOAD), 4);
            put(&mut b, ph + phentsize + 8, offset, 8);
            put(&mut b, ph + phentsize + 32, filesz, 8);
        } else {
            put(&mut b, 28, ph as u64, 4);
            put(&mut b, 42, phentsize as u64, 2);
            put(&mut b, 44, 2, 2);
            put(&mut b, ph, 2, 4);
            put(&mut b, ph + phentsize, u64::from(PT_LOAD), 4);
            put(&mut b, ph + phentsize + 4, offset, 4);
            put(&mut b, ph + phentsize + 16, filesz, 4);
        }
        b
    }

    #[test]
    fn both_classes_and_byte_orders_are_read() {
        for bits in [32, 64] {
            for little in [true, false] {
                let file = forge(bits, little, 183, 0, 100);
                let elf = parse(&file, file.len() as u64).unwrap();
                assert_eq!(
                    (elf.bits, elf.little_endian, elf.machine, elf.elf_type),
                    (bits, little, 183, ET_DYN),
                    "ELF{bits} little={little}"
                );
                assert_eq!(elf.loads, vec![(0, 100)]);
            }
        }
    }

    #[test]
    fn a_segment_past_the_end_or_a_foreign_file_is_refused() {
        let bits = if cfg!(target_pointer_width = "64") {
            64
        } else {
            32
        };
        let little = cfg!(target_endian = "little");
        let machine = host_machine().unwrap_or(0);
        let fits = forge(bits, little, machine, 0, 64);
        if host_machine().is_some() {
            assert_eq!(check(&fits), Ok(()));
        }
        let past = forge(bits, little, machine, 16, 1 << 20);
        assert!(check(&past).unwrap_err().contains("truncated"));
        let wrapping = forge(bits, little, machine, u64::MAX - 1, 8);
        assert!(check(&wrapping).is_err());
        let other_order = forge(bits, !little, machine, 0, 64);
        assert!(check(&other_order).unwrap_err().contains("endian"));
        let other_class = forge(96 - bits, little, machine, 0, 64);
        assert!(check(&other_class).unwrap_err().contains("-bit"));
        let other_machine = forge(bits, little, machine ^ 1, 0, 64);
        if host_machine().is_some() {
            assert!(check(&other_machine).unwrap_err().contains("machine"));
        }
        assert!(check(b"MZ\x90\x00 not an elf")
            .unwrap_err()
            .contains("magic"));
        let cut = &fits[..40];
        assert!(check(cut).is_err());
    }

    #[test]
    fn a_head_is_checked_against_the_whole_file() {
        let host = host_machine().unwrap_or(62);
        let file = forge(64, cfg!(target_endian = "little"), host, 0, 1000);
        // Segments are checked against the file's length, not the head's.
        assert_eq!(check_head(&file, 1000), Ok(()));
        assert!(check_head(&file, 999).unwrap_err().contains("truncated"));
        // A program header table inside the file but past the head has its own reason.
        let head = &file[..100];
        let e = check_head(head, 1000).unwrap_err();
        assert!(e.contains("past the first 100 bytes"), "{e}");
        assert!(check_head(head, 100).unwrap_err().contains("ends inside"));
    }
}
