//! What the bounded fuzzers share: the mutations and the time budget. Their generator is
//! `baton_delegate_api::testing::Rng`, seeded with `Rng::from_state(seed)` so that the
//! seed printed by [`budget`] replays a run exactly.
//!
//! Each fuzzer is bounded by `BATON_FUZZ_SECS` (default 3 s, so a plain `cargo test` stays
//! quick) and seeded by `BATON_FUZZ_SEED` (default a fixed seed, so it is reproducible);
//! CI runs them longer with a new seed per run, and prints the seed first.

use std::time::Duration;

use baton_delegate_api::testing::Rng;

/// The time budget and seed of a fuzzer run, from the environment, announced on stderr.
pub fn budget(name: &str) -> (Duration, u64) {
    let secs: u64 = std::env::var("BATON_FUZZ_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let seed: u64 = std::env::var("BATON_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed_ba70);
    eprintln!("{name} fuzzer: seed {seed} (BATON_FUZZ_SEED), {secs} s (BATON_FUZZ_SECS)");
    (Duration::from_secs(secs), seed)
}

/// One mutation: flipped bits, a field overwritten with a boundary value, a range zeroed
/// or duplicated, or the input cut short. `position(rng, bytes, width)` picks where a
/// mutation of `width` bytes lands (at most `bytes.len() - width`).
pub fn mutate(
    rng: &mut Rng,
    bytes: &mut Vec<u8>,
    position: &dyn Fn(&mut Rng, &[u8], usize) -> usize,
) {
    let len = bytes.len();
    if len < 8 {
        bytes.truncate(rng.below(len));
        return;
    }
    match rng.below(6) {
        0 => {
            for _ in 0..1 + rng.below(4) {
                let i = position(rng, bytes, 1);
                bytes[i] ^= 1 << rng.below(8);
            }
        }
        1 => {
            let i = position(rng, bytes, 4) & !3;
            let v: u32 = [0, 1, 0x7fff_ffff, u32::MAX, 64, 0x8000_0000][rng.below(6)];
            bytes[i..i + 4].copy_from_slice(&v.to_le_bytes());
        }
        2 => {
            let i = position(rng, bytes, 8) & !7;
            let v: u64 = [0, u64::MAX, 1 << 40, 1 << 63, len as u64][rng.below(5)];
            bytes[i..i + 8].copy_from_slice(&v.to_le_bytes());
        }
        3 => {
            let i = position(rng, bytes, 1);
            let n = rng.below(64).min(len - i);
            bytes[i..i + n].fill(0);
        }
        4 => {
            let (a, b) = (position(rng, bytes, 1), position(rng, bytes, 1));
            let n = rng.below(32).min(len - a).min(len - b);
            let chunk = bytes[a..a + n].to_vec();
            bytes[b..b + n].copy_from_slice(&chunk);
        }
        _ => bytes.truncate(rng.below(len)),
    }
}

/// Anywhere in `bytes`.
pub fn anywhere(rng: &mut Rng, bytes: &[u8], width: usize) -> usize {
    rng.below(bytes.len() - width + 1)
}
