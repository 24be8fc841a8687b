//! Weights packed once, at compile, and carried in the blob, so that `init` (and so the
//! load of a `.baton` program) copies them instead of packing them again.
//!
//! Lowering asks for every packing in the same order at compile and at init (it walks the
//! same graph with the same fusion plan), so the blob stores them as a plain list: the
//! n-th request at init takes the n-th packing. A packing whose length does not match the
//! request, or a count that does not match, means the blob does not belong to this graph:
//! init fails and the host compiles the partition again.

use std::ops::Deref;

use baton_delegate_api::bytes;
use baton_delegate_api::sdk::RetainedBlob;

/// Where lowering's packings come from, and how many bytes of them the executable
/// allocated or reads in place (for the ABI's `memory` report).
#[derive(Debug)]
pub(crate) struct Packs<'b> {
    source: Source<'b>,
    /// The constant views' bytes, by view index, when the host retains them.
    constants: Vec<RetainedBlob>,
    owned: usize,
    retained: usize,
}

#[derive(Debug)]
enum Source<'b> {
    /// Packed from the constants (no packings in the blob, or ones for another kernel).
    Fresh,
    /// Compiling: packed from the constants, each packing kept for the blob.
    Record(Vec<Vec<f32>>),
    /// Initialising from a blob: its packings (little-endian f32 bytes) in request order.
    /// With `retained` (the host keeps the blob for the executable's life), a packing is
    /// read in place rather than copied.
    Replay {
        packs: Vec<&'b [u8]>,
        next: usize,
        mismatch: Option<String>,
        retained: Option<RetainedBlob>,
    },
}

/// A packed weight panel: made or copied by this executable, or read in place from a blob
/// the host retains (ABI 1.2 `init_retained`), which saves a program load its largest
/// copy and the process a second resident copy of its weights.
#[derive(Clone)]
pub(crate) enum Panel {
    Owned(Vec<f32>),
    Retained {
        /// Keeps the pointer's provenance explicit: the bytes live as long as the blob.
        blob: RetainedBlob,
        /// Byte offset into the blob, a multiple of 4 from a 64-aligned start.
        start: usize,
        /// Length in floats.
        len: usize,
    },
}

impl Panel {
    /// The panel as a vector this executable owns and may repack (a retained panel is
    /// copied first; packings that change at run time are never retained).
    pub fn make_mut(&mut self) -> &mut Vec<f32> {
        if let Panel::Retained { .. } = self {
            *self = Panel::Owned(self.to_vec());
        }
        match self {
            Panel::Owned(v) => v,
            Panel::Retained { .. } => unreachable!("made owned above"),
        }
    }

    /// Bytes this executable allocated for the panel, and bytes it reads in place.
    pub fn bytes(&self) -> (usize, usize) {
        match self {
            Panel::Owned(v) => (v.capacity() * 4, 0),
            Panel::Retained { len, .. } => (0, len * 4),
        }
    }
}

impl Default for Panel {
    fn default() -> Panel {
        Panel::Owned(Vec::new())
    }
}

impl Deref for Panel {
    type Target = [f32];

    fn deref(&self) -> &[f32] {
        match self {
            Panel::Owned(v) => v,
            Panel::Retained { blob, start, len } => {
                let bytes = &blob.bytes()[*start..*start + *len * 4];
                // SAFETY: `take` checked the range and its 4-byte alignment when it made
                // the panel, and the retained bytes never change.
                unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<f32>(), *len) }
            }
        }
    }
}

impl std::fmt::Debug for Panel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (owned, retained) = self.bytes();
        write!(f, "Panel(owned {owned} B, retained {retained} B)")
    }
}

impl<'b> Packs<'b> {
    fn with(source: Source<'b>) -> Packs<'b> {
        Packs {
            source,
            constants: Vec::new(),
            owned: 0,
            retained: 0,
        }
    }

    /// Lets constants be read in place: `constants[i]` holds the bytes of constant view
    /// `i`, retained by the host for the executable's life.
    pub fn retaining_constants(mut self, constants: &[RetainedBlob]) -> Packs<'b> {
        self.constants = constants.to_vec();
        self
    }

    /// A constant kept unpacked: read in place when `data` is exactly the bytes of
    /// retained constant view `view`, else copied.
    pub fn constant(&mut self, view: Option<usize>, data: std::borrow::Cow<'_, [f32]>) -> Panel {
        let kept = view.and_then(|i| self.constants.get(i).copied());
        let panel = match (kept, &data) {
            (Some(blob), std::borrow::Cow::Borrowed(values)) => {
                in_place(blob, bytemuck::cast_slice(values), values.len())
            }
            _ => None,
        }
        .unwrap_or_else(|| Panel::Owned(data.into_owned()));
        let (owned, retained) = panel.bytes();
        self.owned += owned;
        self.retained += retained;
        panel
    }

    /// Packs from the constants (no packings in the blob, or ones for another kernel).
    pub fn fresh() -> Packs<'b> {
        Packs::with(Source::Fresh)
    }

    /// Compiling: packs from the constants and keeps each packing for the blob.
    pub fn record() -> Packs<'b> {
        Packs::with(Source::Record(Vec::new()))
    }

    /// Initialising from a blob's packings, in request order; read in place when the host
    /// `retained` the blob.
    pub fn replay(packs: Vec<&'b [u8]>, retained: Option<RetainedBlob>) -> Packs<'b> {
        Packs::with(Source::Replay {
            packs,
            next: 0,
            mismatch: None,
            retained,
        })
    }

    /// Bytes of the panels handed out so far: allocated by the executable, and read in
    /// place from a retained blob.
    pub fn tally(&self) -> (usize, usize) {
        (self.owned, self.retained)
    }

    /// A packing of `len` floats: the blob's (in place when retained and aligned, else
    /// copied), or made by `fill` on a zeroed buffer.
    pub fn take(&mut self, len: usize, fill: impl FnOnce(&mut [f32])) -> Panel {
        let panel = self.panel(len, fill);
        let (owned, retained) = panel.bytes();
        self.owned += owned;
        self.retained += retained;
        panel
    }

    fn panel(&mut self, len: usize, fill: impl FnOnce(&mut [f32])) -> Panel {
        if let Source::Replay {
            packs,
            next,
            mismatch,
            retained,
        } = &mut self.source
        {
            let n = *next;
            *next += 1;
            match packs.get(n) {
                Some(b) if b.len() == len * 4 => {
                    if let Some(panel) = retained.and_then(|r| in_place(r, b, len)) {
                        return panel;
                    }
                    return Panel::Owned(bytes::f32s(b));
                }
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
        if let Source::Record(kept) = &mut self.source {
            kept.push(data.clone());
        }
        Panel::Owned(data)
    }

    /// Checks that a replay used every packing of the blob, each as stored.
    pub fn finish(&self) -> Result<(), String> {
        match &self.source {
            Source::Replay {
                mismatch: Some(m), ..
            } => Err(format!(
                "the blob's packed weights do not fit its graph: {m}"
            )),
            Source::Replay { packs, next, .. } if *next != packs.len() => Err(format!(
                "the blob's packed weights do not fit its graph: it holds {} packings, \
                 lowering used {next}",
                packs.len()
            )),
            _ => Ok(()),
        }
    }

    /// The packings recorded while compiling.
    pub fn into_recorded(self) -> Vec<Vec<f32>> {
        match self.source {
            Source::Record(kept) => kept,
            _ => Vec::new(),
        }
    }
}

/// `packing` (a slice of `blob`'s bytes) as a panel read in place, when it lies inside the
/// blob and its floats are aligned (on a big-endian machine the stored little-endian
/// floats must be converted, so they are copied).
fn in_place(blob: RetainedBlob, packing: &[u8], len: usize) -> Option<Panel> {
    if cfg!(target_endian = "big") {
        return None;
    }
    let whole = blob.bytes();
    let start = (packing.as_ptr() as usize).checked_sub(whole.as_ptr() as usize)?;
    let inside = start
        .checked_add(packing.len())
        .is_some_and(|end| end <= whole.len());
    let aligned = packing.as_ptr().align_offset(std::mem::align_of::<f32>()) == 0;
    (inside && aligned).then_some(Panel::Retained { blob, start, len })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill(v: f32) -> impl FnOnce(&mut [f32]) {
        move |d: &mut [f32]| d.fill(v)
    }

    #[test]
    fn replay_returns_what_record_kept() {
        let mut rec = Packs::record();
        assert_eq!(*rec.take(2, fill(1.0)), [1.0, 1.0]);
        assert_eq!(*rec.take(3, fill(2.0)), [2.0; 3]);
        let kept = rec.into_recorded();
        let bytes: Vec<Vec<u8>> = kept
            .iter()
            .map(|p| p.iter().flat_map(|v| v.to_le_bytes()).collect())
            .collect();
        let mut rep = Packs::replay(bytes.iter().map(Vec::as_slice).collect(), None);
        // The fill is not called on a replay: the stored values come back.
        assert_eq!(*rep.take(2, fill(9.0)), [1.0, 1.0]);
        assert_eq!(*rep.take(3, fill(9.0)), [2.0; 3]);
        assert!(rep.finish().is_ok());
    }

    #[test]
    fn a_replay_that_does_not_fit_fails_at_finish() {
        let stored = [0u8; 8];
        let mut short = Packs::replay(vec![&stored[..]], None);
        assert_eq!(*short.take(3, fill(5.0)), [5.0; 3]);
        assert!(short.finish().unwrap_err().contains("packing 0"));
        let mut unused = Packs::replay(vec![&stored[..], &stored[..]], None);
        unused.take(2, fill(0.0));
        assert!(unused.finish().unwrap_err().contains("holds 2 packings"));
    }

    #[test]
    fn a_retained_replay_reads_the_blob_in_place() {
        let floats: Vec<f32> = (0..24).map(|i| i as f32).collect();
        let blob: Vec<u8> = floats.iter().flat_map(|v| v.to_le_bytes()).collect();
        // SAFETY: `blob` outlives every panel made from it in this test.
        let retained = unsafe { RetainedBlob::new(blob.as_ptr(), blob.len()) };
        let mut rep = Packs::replay(vec![&blob[0..32], &blob[32..96]], Some(retained));
        let a = rep.take(8, fill(9.0));
        let b = rep.take(16, fill(9.0));
        assert!(rep.finish().is_ok());
        assert_eq!(*a, floats[0..8]);
        assert_eq!(*b, floats[8..24]);
        assert_eq!(b.bytes(), (0, 64), "read in place, nothing allocated");
        assert_eq!(b.as_ptr() as usize, blob[32..].as_ptr() as usize);
        // A packing outside the retained bytes is copied, never pointed at.
        let other = blob.clone();
        let mut foreign = Packs::replay(vec![&other[0..32]], Some(retained));
        let c = foreign.take(8, fill(9.0));
        assert_eq!(c.bytes(), (32, 0));
        assert_eq!(*c, floats[0..8]);
    }
}
