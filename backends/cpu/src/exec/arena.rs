//! The arena: every intermediate tensor of an executable lives in one buffer, at an offset
//! planned at init from the steps that write and read it.
//!
//! Two intermediates may share bytes when no step needs both: one is last read before the
//! other is first written. Placement is greedy (each intermediate, in some order, at the
//! lowest offset clear of every already placed one whose lifetime overlaps), tried in a
//! few orders, the smallest result kept; the peak-live lower bound (the most bytes live
//! at any one step) is what no placement can beat.
//!
//! Lifetimes are closed intervals of step indices. A step's output is live at that step,
//! as are its operands, so an op never writes over what it reads.

/// Offsets and lengths are in floats; each intermediate starts on a 64-byte boundary so
/// that the kernels' aligned loads stay aligned.
pub(crate) const ALIGN: usize = 16;

/// One intermediate: its length in floats and the first and last steps that touch it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Lifetime {
    pub len: usize,
    pub first: usize,
    pub last: usize,
}

impl Lifetime {
    fn overlaps(&self, other: &Lifetime) -> bool {
        self.first <= other.last && other.first <= self.last
    }

    /// The length rounded up to the alignment; saturates, so that an absurd length fails
    /// the checked sums of the plan rather than wrapping.
    fn padded(&self) -> usize {
        self.len
            .checked_next_multiple_of(ALIGN)
            .unwrap_or(usize::MAX)
    }
}

/// Where each intermediate lives, and how big the arena is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ArenaPlan {
    /// Per intermediate, its offset in floats.
    pub offsets: Vec<usize>,
    /// The arena's length in floats.
    pub len: usize,
    /// The most floats live at any one step: no plan can be smaller.
    pub lower_bound: usize,
}

/// Places `lives` in one buffer. Returns `None` when the sizes overflow `usize`.
///
/// Greedy placement depends on the order it takes the intermediates in, and no one order
/// wins on every graph (largest first is best on CNNs; on a transformer, taking the
/// longest-lived first packs the residual stream better). Each order costs microseconds,
/// so several are tried and the smallest arena kept.
pub(crate) fn plan(lives: &[Lifetime]) -> Option<ArenaPlan> {
    type Key = fn(&Lifetime) -> (usize, usize);
    let orders: [Key; 3] = [
        |l| (usize::MAX - l.padded(), l.first),
        |l| (usize::MAX - (l.last - l.first), usize::MAX - l.padded()),
        |l| {
            let area = l.padded().saturating_mul(l.last - l.first + 1);
            (usize::MAX - area, l.first)
        },
    ];
    let lower_bound = lower_bound(lives)?;
    let mut best: Option<ArenaPlan> = None;
    for key in orders {
        let mut order: Vec<usize> = (0..lives.len()).collect();
        order.sort_by_key(|&i| (key(&lives[i]), i));
        let (offsets, len) = place(lives, &order)?;
        if best.as_ref().is_none_or(|b| len < b.len) {
            best = Some(ArenaPlan {
                offsets,
                len,
                lower_bound,
            });
        }
        if len == lower_bound {
            break;
        }
    }
    best
}

/// Places the intermediates in `order`, each at the lowest offset clear of those already
/// placed whose lifetimes overlap it. Returns the offsets and the arena's length.
fn place(lives: &[Lifetime], order: &[usize]) -> Option<(Vec<usize>, usize)> {
    let mut offsets = vec![0usize; lives.len()];
    let mut placed: Vec<usize> = Vec::with_capacity(lives.len());
    let mut len = 0usize;
    // Reused per placement: the (offset, end) ranges of the time-overlapping neighbours.
    let mut taken: Vec<(usize, usize)> = Vec::new();
    for &i in order {
        let size = lives[i].padded();
        taken.clear();
        taken.extend(
            placed
                .iter()
                .filter(|&&j| lives[j].overlaps(&lives[i]))
                .map(|&j| (offsets[j], offsets[j].saturating_add(lives[j].padded()))),
        );
        taken.sort_unstable();
        let mut at = 0usize;
        for &(start, end) in &taken {
            if start >= at.checked_add(size)? {
                break;
            }
            at = at.max(end);
        }
        offsets[i] = at;
        len = len.max(at.checked_add(size)?);
        placed.push(i);
    }
    Some((offsets, len))
}

/// The most floats (padded) live at any one step.
fn lower_bound(lives: &[Lifetime]) -> Option<usize> {
    // Sweep over interval starts and ends: +len at `first`, -len after `last`.
    let mut events: Vec<(usize, bool, usize)> = Vec::with_capacity(lives.len() * 2);
    for l in lives {
        events.push((l.first, true, l.padded()));
        events.push((l.last.saturating_add(1), false, l.padded()));
    }
    // At equal times, ends come before starts (false < true).
    events.sort_unstable();
    let (mut live, mut peak) = (0usize, 0usize);
    for (_, start, size) in events {
        if start {
            live = live.checked_add(size)?;
            peak = peak.max(live);
        } else {
            live -= size;
        }
    }
    Some(peak)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn life(len: usize, first: usize, last: usize) -> Lifetime {
        Lifetime { len, first, last }
    }

    #[test]
    fn a_chain_reuses_memory() {
        // a -> b -> c -> d: each step reads the previous output and writes the next.
        let lives = [
            life(64, 0, 1),
            life(64, 1, 2),
            life(64, 2, 3),
            life(64, 3, 4),
        ];
        let p = plan(&lives).unwrap();
        assert_eq!(p.lower_bound, 128);
        assert_eq!(p.len, 128);
        assert_ne!(p.offsets[0], p.offsets[1]);
        assert_eq!(p.offsets[0], p.offsets[2]);
    }

    #[test]
    fn a_skip_connection_stays_live() {
        // x is read again at step 3 (a residual add): it may not share with b or c.
        let lives = [
            life(32, 0, 3),
            life(32, 1, 2),
            life(32, 2, 3),
            life(32, 3, 4),
        ];
        let p = plan(&lives).unwrap();
        for j in 1..4 {
            if lives[0].overlaps(&lives[j]) {
                assert_ne!(p.offsets[0], p.offsets[j]);
            }
        }
        assert_eq!(p.len, p.lower_bound);
    }

    #[test]
    fn offsets_are_aligned_and_overflow_is_refused() {
        let p = plan(&[life(3, 0, 1), life(5, 0, 1)]).unwrap();
        assert!(p.offsets.iter().all(|o| o % ALIGN == 0));
        assert_eq!(p.len, 2 * ALIGN);
        assert!(plan(&[life(usize::MAX - 3, 0, 0), life(64, 0, 0)]).is_none());
    }

    proptest! {
        #[test]
        fn live_together_never_share(
            spec in proptest::collection::vec((1usize..5000, 0usize..40, 0usize..10), 1..60)
        ) {
            let lives: Vec<Lifetime> =
                spec.iter().map(|&(len, first, span)| life(len, first, first + span)).collect();
            let p = plan(&lives).unwrap();
            prop_assert!(p.len >= p.lower_bound);
            for i in 0..lives.len() {
                prop_assert!(p.offsets[i] + lives[i].len <= p.len);
                for j in i + 1..lives.len() {
                    if lives[i].overlaps(&lives[j]) {
                        let (a, b) = (p.offsets[i], p.offsets[j]);
                        prop_assert!(
                            a + lives[i].len <= b || b + lives[j].len <= a,
                            "{:?} at {a} and {:?} at {b}", lives[i], lives[j]
                        );
                    }
                }
            }
        }
    }
}
