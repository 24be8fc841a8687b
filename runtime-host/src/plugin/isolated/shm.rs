//! The shared-memory region tensors cross in: an anonymous memory file (`memfd_create`)
//! that the host and its plugin process both map. The host lays a call's tensors out in it,
//! the plugin reads its inputs and writes its outputs there in place, and the host reads
//! them back: the only copies are the host's own, into and out of its arena.
//!
//! The file is sealed against shrinking: code in the plugin process holds the descriptor
//! too, and a file cut under the host's mapping would end the host with SIGBUS on its next
//! access. Growing stays allowed; only the host grows it (`ensure`), and the child maps
//! the new size when a request says so (`remap`).

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use memmap2::MmapMut;

/// Alignment of every tensor in the region, as the ABI promises for views
/// (`BATON_DATA_ALIGNMENT`).
pub(super) const ALIGN: usize = 64;

/// One mapping of the shared file.
pub(super) struct Region {
    file: File,
    map: Option<MmapMut>,
}

impl Region {
    /// A new sealed memory file of `len` bytes, mapped (host side).
    pub(super) fn create(len: usize) -> io::Result<Region> {
        // SAFETY: a NUL-terminated name and valid flags; the result is checked.
        let fd = unsafe {
            libc::memfd_create(
                c"baton-plugin-tensors".as_ptr(),
                libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        // SAFETY: fcntl on a descriptor we own; F_ADD_SEALS takes an int.
        if unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, libc::F_SEAL_SHRINK) } < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut region = Region { file, map: None };
        region.ensure(len)?;
        Ok(region)
    }

    /// The region behind an inherited descriptor, mapped at `len` bytes (child side).
    pub(super) fn adopt(fd: OwnedFd, len: usize) -> io::Result<Region> {
        let mut region = Region {
            file: File::from(fd),
            map: None,
        };
        region.remap(len)?;
        Ok(region)
    }

    /// The descriptor, for the child to inherit.
    pub(super) fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// Mapped bytes.
    pub(super) fn len(&self) -> usize {
        self.map.as_ref().map_or(0, |m| m.len())
    }

    /// Grows the file and the mapping to at least `len` bytes (host side). Growth at least
    /// doubles, so a run of slowly larger calls does not remap every time.
    pub(super) fn ensure(&mut self, len: usize) -> io::Result<()> {
        if len <= self.len() && self.map.is_some() {
            return Ok(());
        }
        let target = len
            .max(self.len().saturating_mul(2))
            .max(1 << 16)
            .checked_next_multiple_of(4096)
            .ok_or_else(|| io::Error::other("shared region size overflows"))?;
        self.file.set_len(target as u64)?;
        self.remap(target)
    }

    /// Maps the first `len` bytes, refusing a length beyond the file (an access there
    /// would be SIGBUS, not an error).
    pub(super) fn remap(&mut self, len: usize) -> io::Result<()> {
        if self.map.as_ref().is_some_and(|m| m.len() == len) {
            return Ok(());
        }
        let size = self.file.metadata()?.len();
        if len as u64 > size || len == 0 {
            return Err(io::Error::other(format!(
                "shared region of {len} bytes asked for, the file has {size}"
            )));
        }
        self.map = None;
        // SAFETY: the file is a memfd sealed against shrinking, at least `len` bytes long
        // (checked above); the other process writes into it only during a call, and this
        // side reads it only between calls, through raw copies.
        self.map = Some(unsafe { memmap2::MmapOptions::new().len(len).map_mut(&self.file)? });
        Ok(())
    }

    /// The start of the mapping (null when nothing is mapped).
    pub(super) fn base(&mut self) -> *mut u8 {
        self.map
            .as_mut()
            .map_or(std::ptr::null_mut(), |m| m.as_mut_ptr())
    }
}

/// Offsets of `lens` laid out one after another, each aligned to [`ALIGN`], and the total;
/// `None` when the sum overflows.
pub(super) fn layout(lens: impl IntoIterator<Item = usize>) -> Option<(Vec<usize>, usize)> {
    let mut end = 0usize;
    let mut offsets = Vec::new();
    for len in lens {
        let at = end.checked_next_multiple_of(ALIGN)?;
        offsets.push(at);
        end = at.checked_add(len)?;
    }
    Some((offsets, end.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_grow_and_cannot_be_shrunk_by_the_other_side() {
        let mut r = Region::create(100).unwrap();
        assert!(r.len() >= 100 && r.len().is_multiple_of(4096));
        let first = r.len();
        r.ensure(first + 1).unwrap();
        assert!(r.len() >= 2 * first);
        // The child's descriptor is the same file: shrinking it must fail (sealed).
        assert!(r.file.set_len(10).is_err());
        // A mapping beyond the file is refused, not made.
        let dup = r.file.try_clone().unwrap();
        assert!(Region::adopt(dup.into(), r.len() + 4096).is_err());
    }

    #[test]
    fn layout_aligns_and_checks_overflow() {
        assert_eq!(layout([3, 64, 1]), Some((vec![0, 64, 128], 129)));
        assert_eq!(layout([]), Some((vec![], 1)));
        assert_eq!(layout([usize::MAX, 1]), None);
    }
}
