//! Little-endian byte writing and bounds-checked reading, for the blobs delegates make.
//!
//! Every blob format in this workspace is a run of little-endian integers, lengths and
//! aligned payloads read back without trusting any of them. One reader means one place
//! where a length that overflows, or runs past the end, becomes an error naming what was
//! being read, instead of a panic in each plugin's own copy.

use thiserror::Error;

/// A read past the end of the buffer, or a length that does not fit in memory.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("truncated at byte {at} reading the {what} ({needed} bytes needed, {left} left)")]
pub struct Truncated {
    /// What was being read, as the caller named it.
    pub what: &'static str,
    /// The offset the read started at.
    pub at: usize,
    /// Bytes the read needed (`usize::MAX` for a length that overflowed).
    pub needed: usize,
    /// Bytes that were left.
    pub left: usize,
}

/// Appends little-endian values to a growing buffer.
#[derive(Clone, Debug, Default)]
pub struct ByteWriter {
    buf: Vec<u8>,
}

impl ByteWriter {
    /// An empty writer.
    pub fn new() -> ByteWriter {
        ByteWriter::default()
    }

    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Appends raw bytes.
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// Appends a `u32`.
    pub fn u32(&mut self, v: u32) {
        self.bytes(&v.to_le_bytes());
    }

    /// Appends a `u64`.
    pub fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }

    /// Appends `f32` values.
    pub fn f32s(&mut self, v: &[f32]) {
        if cfg!(target_endian = "little") {
            self.bytes(bytemuck::cast_slice(v));
        } else {
            for x in v {
                self.bytes(&x.to_le_bytes());
            }
        }
    }

    /// Zero bytes up to the next multiple of `align` from the start of the buffer.
    pub fn pad_to(&mut self, align: usize) {
        self.buf
            .resize(self.buf.len().next_multiple_of(align.max(1)), 0);
    }

    /// The bytes written.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

/// Reads little-endian values from a buffer, checking every length against what is left.
#[derive(Clone, Debug)]
pub struct ByteReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> ByteReader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> ByteReader<'a> {
        ByteReader { buf, pos: 0 }
    }

    /// The offset of the next read.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes not read yet.
    pub fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], Truncated> {
        if n > self.left() {
            return Err(Truncated {
                what,
                at: self.pos,
                needed: n,
                left: self.left(),
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// The next `n` items of `size` bytes each, checked for overflow.
    pub fn take_items(
        &mut self,
        n: usize,
        size: usize,
        what: &'static str,
    ) -> Result<&'a [u8], Truncated> {
        let bytes = n.saturating_mul(size);
        self.take(bytes, what)
    }

    /// The next `u32`.
    pub fn u32(&mut self, what: &'static str) -> Result<u32, Truncated> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// The next `u64`.
    pub fn u64(&mut self, what: &'static str) -> Result<u64, Truncated> {
        let mut a = [0; 8];
        a.copy_from_slice(self.take(8, what)?);
        Ok(u64::from_le_bytes(a))
    }

    /// The next `u64` as a length in items of `size` bytes: one that could not fit in the
    /// bytes left is an error now, before anyone allocates for it.
    pub fn count(&mut self, size: usize, what: &'static str) -> Result<usize, Truncated> {
        let at = self.pos;
        let n = self.u64(what)?;
        match usize::try_from(n) {
            Ok(n) if n.checked_mul(size.max(1)).is_some_and(|b| b <= self.left()) => Ok(n),
            _ => Err(Truncated {
                what,
                at,
                needed: usize::try_from(n)
                    .ok()
                    .and_then(|n| n.checked_mul(size.max(1)))
                    .unwrap_or(usize::MAX),
                left: self.left(),
            }),
        }
    }

    /// Skips to the next multiple of `align` from the start of the buffer.
    pub fn align(&mut self, align: usize, what: &'static str) -> Result<(), Truncated> {
        let to = self.pos.next_multiple_of(align.max(1));
        self.take(to - self.pos, what).map(|_| ())
    }
}

/// `f32` values from little-endian bytes (a multiple of 4 long), copied: at memcpy speed on
/// a little-endian machine, whatever the alignment of `bytes`.
pub fn f32s(bytes: &[u8]) -> Vec<f32> {
    let n = bytes.len() / 4;
    if cfg!(target_endian = "little") {
        // Copied straight into uninitialised capacity: zeroing first (`vec![0.0; n]`) then
        // copying was a third of a program load's time spent on memory it overwrote.
        let mut v: Vec<f32> = Vec::with_capacity(n);
        // SAFETY: `v` has capacity for `n` floats (`4 * n` bytes), `bytes` holds at least
        // `4 * n`, the two do not overlap, and every bit pattern is a valid f32.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), v.as_mut_ptr().cast::<u8>(), n * 4);
            v.set_len(n);
        }
        v
    } else {
        bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_checked_reads() {
        let mut w = ByteWriter::new();
        w.u32(7);
        w.u64(3);
        w.pad_to(16);
        w.f32s(&[1.5, -2.0, 3.25]);
        let buf = w.finish();
        let mut r = ByteReader::new(&buf);
        assert_eq!(r.u32("a").unwrap(), 7);
        assert_eq!(r.count(4, "n").unwrap(), 3);
        r.align(16, "pad").unwrap();
        assert_eq!(
            f32s(r.take_items(3, 4, "values").unwrap()),
            [1.5, -2.0, 3.25]
        );
        let e = r.u32("tail").unwrap_err();
        assert_eq!((e.what, e.at, e.left), ("tail", 28, 0));
        assert!(e.to_string().contains("reading the tail"));
    }

    #[test]
    fn lengths_beyond_the_buffer_are_refused_before_allocating() {
        let mut w = ByteWriter::new();
        w.u64(u64::MAX);
        w.u64(1 << 40);
        let buf = w.finish();
        let mut r = ByteReader::new(&buf);
        assert!(r.count(4, "huge").is_err());
        assert!(r.count(1, "big").is_err());
        assert!(ByteReader::new(&[0; 8])
            .take_items(usize::MAX, 2, "x")
            .is_err());
    }
}
