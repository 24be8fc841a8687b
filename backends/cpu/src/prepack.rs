//! Weights packed once, at compile, and carried in the blob, so that `init` (and so the
//! load of a `.baton` program) copies them instead of packing them again.
//!
//! Lowering asks for every packing in the same order at compile and at init (it walks the
//! same graph with the same fusion plan), so the blob stores them as a plain list: the
//! n-th request at init takes the n-th packing. A packing whose length does not match the
//! request, or a count that does not match, means the blob does not belong to this graph:
//! init fails and the host compiles the partition again.

use baton_delegate_api::bytes;

/// Where lowering's packings come from.
#[derive(Debug)]
pub(crate) enum Packs<'b> {
    /// Packed from the constants (no packings in the blob, or ones for another kernel).
    Fresh,
    /// Compiling: packed from the constants, each packing kept for the blob.
    Record(Vec<Vec<f32>>),
    /// Initialising from a blob: its packings (little-endian f32 bytes) in request order.
    Replay {
        packs: Vec<&'b [u8]>,
        next: usize,
        mismatch: Option<String>,
    },
}

impl<'b> Packs<'b> {
    /// A packing of `len` floats: the blob's, or made by `fill` on a zeroed buffer.
    pub fn take(&mut self, len: usize, fill: impl FnOnce(&mut [f32])) -> Vec<f32> {
        if let Packs::Replay {
            packs,
            next,
            mismatch,
        } = self
        {
            let n = *next;
            *next += 1;
            match packs.get(n) {
                Some(b) if b.len() == len * 4 => return bytes::f32s(b),
                found => {
                    mismatch.get_or_insert_with(|| {
                        format!(
                            "packing {n}: the blob holds {}, lowering needs {len} floats",
                            found.map_or("none".to_string(), |b| format!("{} floats", b.len() / 4))
                        )
                    });
                }
            }
        }
        let mut data = vec![0.0; len];
        fill(&mut data);
        if let Packs::Record(kept) = self {
            kept.push(data.clone());
        }
        data
    }

    /// Checks that a replay used every packing of the blob, each as stored.
    pub fn finish(&self) -> Result<(), String> {
        match self {
            Packs::Replay {
                mismatch: Some(m), ..
            } => Err(format!(
                "the blob's packed weights do not fit its graph: {m}"
            )),
            Packs::Replay { packs, next, .. } if *next != packs.len() => Err(format!(
                "the blob's packed weights do not fit its graph: it holds {} packings, \
                 lowering used {next}",
                packs.len()
            )),
            _ => Ok(()),
        }
    }

    /// The packings recorded while compiling.
    pub fn into_recorded(self) -> Vec<Vec<f32>> {
        match self {
            Packs::Record(kept) => kept,
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(v: f32) -> impl FnOnce(&mut [f32]) {
        move |d: &mut [f32]| d.fill(v)
    }

    #[test]
    fn replay_returns_what_record_kept() {
        let mut rec = Packs::Record(Vec::new());
        assert_eq!(rec.take(2, fill(1.0)), [1.0, 1.0]);
        assert_eq!(rec.take(3, fill(2.0)), [2.0; 3]);
        let kept = rec.into_recorded();
        let bytes: Vec<Vec<u8>> = kept
            .iter()
            .map(|p| p.iter().flat_map(|v| v.to_le_bytes()).collect())
            .collect();
        let mut rep = Packs::Replay {
            packs: bytes.iter().map(Vec::as_slice).collect(),
            next: 0,
            mismatch: None,
        };
        // The fill is not called on a replay: the stored values come back.
        assert_eq!(rep.take(2, fill(9.0)), [1.0, 1.0]);
        assert_eq!(rep.take(3, fill(9.0)), [2.0; 3]);
        assert!(rep.finish().is_ok());
    }

    #[test]
    fn a_replay_that_does_not_fit_fails_at_finish() {
        let stored = [0u8; 8];
        let mut short = Packs::Replay {
            packs: vec![&stored[..]],
            next: 0,
            mismatch: None,
        };
        assert_eq!(short.take(3, fill(5.0)), [5.0; 3]);
        assert!(short.finish().unwrap_err().contains("packing 0"));
        let mut unused = Packs::Replay {
            packs: vec![&stored[..], &stored[..]],
            next: 0,
            mismatch: None,
        };
        unused.take(2, fill(0.0));
        assert!(unused.finish().unwrap_err().contains("holds 2 packings"));
    }
}
