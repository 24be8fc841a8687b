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

/// So that `?` turns a short read into the `String` errors most blob decoders report.
impl From<Truncated> for String {
    fn from(e: Truncated) -> String {
        e.to_string()
    }
}

/// A length-prefixed string that could not be read.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum StrError {
    /// The length, or the bytes it announces, run past the end.
    #[error(transparent)]
    Truncated(#[from] Truncated),
    /// The bytes are there but are not UTF-8: a corrupt blob, told apart from a short one.
    #[error("the {what} at byte {at} is not UTF-8")]
    NotUtf8 {
        /// What was being read, as the caller named it.
        what: &'static str,
        /// The offset of the string's first byte (after its length).
        at: usize,
    },
}

/// As for [`Truncated`]: `?` in decoders whose errors are `String`.
impl From<StrError> for String {
    fn from(e: StrError) -> String {
        e.to_string()
    }
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

    /// Appends a `u8`.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    /// Appends a `u16`.
    pub fn u16(&mut self, v: u16) {
        self.bytes(&v.to_le_bytes());
    }

    /// Appends an `i32`.
    pub fn i32(&mut self, v: i32) {
        self.bytes(&v.to_le_bytes());
    }

    /// Appends a `u32`.
    pub fn u32(&mut self, v: u32) {
        self.bytes(&v.to_le_bytes());
    }

    /// Appends a `u64`.
    pub fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }

    /// Appends a string as its `u32` byte length then its UTF-8 bytes, as
    /// [`ByteReader::str`] reads it back.
    ///
    /// # Panics
    ///
    /// If `s` is 4 GiB or longer: no blob format here has names that long, and a silently
    /// wrapped length would write a blob that reads back as something else.
    pub fn str(&mut self, s: &str) {
        self.u32(u32::try_from(s.len()).expect("a string in a blob is under 4 GiB"));
        self.bytes(s.as_bytes());
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

    /// The next `N` bytes as an array, for the fixed-size integer reads.
    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], Truncated> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }

    /// The next `u8`.
    pub fn u8(&mut self, what: &'static str) -> Result<u8, Truncated> {
        self.array(what).map(u8::from_le_bytes)
    }

    /// The next `u16`.
    pub fn u16(&mut self, what: &'static str) -> Result<u16, Truncated> {
        self.array(what).map(u16::from_le_bytes)
    }

    /// The next `i32`.
    pub fn i32(&mut self, what: &'static str) -> Result<i32, Truncated> {
        self.array(what).map(i32::from_le_bytes)
    }

    /// The next `u32`.
    pub fn u32(&mut self, what: &'static str) -> Result<u32, Truncated> {
        self.array(what).map(u32::from_le_bytes)
    }

    /// The next `u64`.
    pub fn u64(&mut self, what: &'static str) -> Result<u64, Truncated> {
        self.array(what).map(u64::from_le_bytes)
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

    /// The next `u32` as a count of items at least `item` bytes each: as [`count`](Self::count)
    /// for the formats whose lists are prefixed by a `u32`, so that a corrupt count is refused
    /// before a `Vec::with_capacity` or a loop of that many reads.
    pub fn count_u32(&mut self, item: usize, what: &'static str) -> Result<usize, Truncated> {
        let at = self.pos;
        let n = usize::try_from(self.u32(what)?).unwrap_or(usize::MAX);
        match n.checked_mul(item.max(1)) {
            Some(bytes) if bytes <= self.left() => Ok(n),
            bytes => Err(Truncated {
                what,
                at,
                needed: bytes.unwrap_or(usize::MAX),
                left: self.left(),
            }),
        }
    }

    /// A string written by [`ByteWriter::str`]: a `u32` byte length, then UTF-8.
    pub fn str(&mut self, what: &'static str) -> Result<&'a str, StrError> {
        let n = self.count_u32(1, what)?;
        let at = self.pos;
        std::str::from_utf8(self.take(n, what)?).map_err(|_| StrError::NotUtf8 { what, at })
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

    /// One of each small field, with the bytes it must produce.
    fn fields() -> Vec<u8> {
        let mut w = ByteWriter::new();
        w.u8(0xab);
        w.u16(0x1234);
        w.i32(-2);
        w.str("hé");
        w.str("");
        w.finish()
    }

    fn read_fields(buf: &[u8]) -> Result<(u8, u16, i32, String, String), StrError> {
        let mut r = ByteReader::new(buf);
        Ok((
            r.u8("a")?,
            r.u16("b")?,
            r.i32("c")?,
            r.str("name")?.to_owned(),
            r.str("empty")?.to_owned(),
        ))
    }

    #[test]
    fn small_fields_are_little_endian_and_read_back() {
        let buf = fields();
        assert_eq!(
            buf,
            [0xab, 0x34, 0x12, 0xfe, 0xff, 0xff, 0xff, 3, 0, 0, 0, b'h', 0xc3, 0xa9, 0, 0, 0, 0]
        );
        assert_eq!(
            read_fields(&buf).unwrap(),
            (0xab, 0x1234, -2, "hé".into(), String::new())
        );
    }

    #[test]
    fn every_prefix_is_refused_naming_the_field_it_ends_in() {
        let buf = fields();
        // (end of the field, its name, where its read starts, whether it is a string): a
        // string's length and bytes are one field, and a length its bytes cannot fill is
        // refused at the length, with `left` counted after it as for `count`.
        let fields = [
            (1, "a", 0, false),
            (3, "b", 1, false),
            (7, "c", 3, false),
            (14, "name", 7, true),
            (18, "empty", 14, true),
        ];
        for n in 0..buf.len() {
            let &(_, what, at, string) = fields.iter().find(|f| n < f.0).unwrap();
            let left = if string && n >= at + 4 {
                n - at - 4
            } else {
                n - at
            };
            match read_fields(&buf[..n]) {
                Err(StrError::Truncated(e)) => {
                    assert_eq!((e.what, e.at, e.left), (what, at, left), "{n}: {e}")
                }
                other => panic!("{n} bytes: {other:?}"),
            }
        }
    }

    #[test]
    fn u32_counts_that_overrun_are_refused() {
        let mut w = ByteWriter::new();
        w.u32(2);
        w.bytes(&[0; 8]);
        let buf = w.finish();
        // Exactly filling what is left is fine; one more byte per item is not.
        assert_eq!(ByteReader::new(&buf).count_u32(4, "fits"), Ok(2));
        assert_eq!(
            ByteReader::new(&buf).count_u32(5, "items"),
            Err(Truncated {
                what: "items",
                at: 0,
                needed: 10,
                left: 8
            })
        );
        // Items of size 0 count as 1 byte, so a count can never exceed the bytes left.
        let mut r = ByteReader::new(&[9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(r.count_u32(0, "n").unwrap_err().needed, 9);
        // A product that overflows is refused, not wrapped into something small.
        let e = ByteReader::new(&u32::MAX.to_le_bytes())
            .count_u32(usize::MAX, "huge")
            .unwrap_err();
        assert_eq!((e.needed, e.left), (usize::MAX, 0));
        // The count itself cut short.
        assert_eq!(
            ByteReader::new(&[1, 0])
                .count_u32(1, "n")
                .unwrap_err()
                .needed,
            4
        );
    }

    #[test]
    fn strings_that_overrun_or_are_not_utf8_are_refused() {
        let mut w = ByteWriter::new();
        w.u32(3);
        w.bytes(&[b'a', 0xff, b'b']);
        let e = ByteReader::new(&w.finish()).str("name").unwrap_err();
        assert_eq!(
            e,
            StrError::NotUtf8 {
                what: "name",
                at: 4
            }
        );
        assert_eq!(e.to_string(), "the name at byte 4 is not UTF-8");
        let e = ByteReader::new(&[5, 0, 0, 0, b'a'])
            .str("name")
            .unwrap_err();
        assert!(matches!(
            e,
            StrError::Truncated(Truncated {
                needed: 5,
                left: 1,
                ..
            })
        ));
        assert!(e
            .to_string()
            .starts_with("truncated at byte 0 reading the name"));
    }

    #[test]
    fn question_mark_turns_both_errors_into_strings() {
        fn decode(buf: &[u8]) -> Result<String, String> {
            let mut r = ByteReader::new(buf);
            let n = r.u8("tag")?;
            Ok(format!("{n} {}", r.str("label")?))
        }
        assert_eq!(decode(&[7, 1, 0, 0, 0, b'x']).unwrap(), "7 x");
        assert_eq!(
            decode(&[]).unwrap_err(),
            "truncated at byte 0 reading the tag (1 bytes needed, 0 left)"
        );
        assert_eq!(
            decode(&[7, 1, 0, 0, 0, 0x80]).unwrap_err(),
            "the label at byte 5 is not UTF-8"
        );
    }
}
