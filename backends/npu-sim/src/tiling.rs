//! Tiling: splitting each command so one tile's operands fit the SRAM.
//!
//! A tile is the unit the NPU's DMA brings into SRAM and the MAC array works on: for a
//! convolution, a band of output rows for a block of output channels, with the input rows
//! that band reads, the block's weights, biases and multipliers, and the band's output.
//! The planner picks the tile shape with the fewest tiles (so the least re-fetching),
//! preferring whole channel sets on ties, and fails when even one output row of one
//! channel does not fit: `supports` turns that into a RESOURCE refusal.

use crate::command::{Conv, Fc, Pool};

/// Bytes of per-output-channel parameters held in SRAM: bias (4), multiplier (4), shift (1).
pub const PARAM_BYTES: usize = 9;

/// Channel block candidates: `m`, then halving down to 1.
fn blocks(m: usize) -> Vec<usize> {
    let mut v = vec![m.max(1)];
    while *v.last().expect("non-empty") > 1 {
        let next = v.last().expect("non-empty").div_ceil(2);
        v.push(next);
    }
    v
}

/// The largest `rows` in `1..=max_rows` with `bytes(rows) <= sram` (bytes grows with rows).
fn most_rows(max_rows: usize, sram: usize, bytes: impl Fn(usize) -> usize) -> Option<usize> {
    if bytes(1) > sram {
        return None;
    }
    let (mut lo, mut hi) = (1, max_rows.max(1));
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if bytes(mid) <= sram {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(lo)
}

/// SRAM bytes of a convolution tile of `rows` output rows and `ch` output channels.
pub fn conv_tile_bytes(b: &Conv, depthwise: bool, rows: usize, ch: usize) -> usize {
    let (c, h, w) = (b.c as usize, b.h as usize, b.w as usize);
    let mult = if depthwise {
        (b.m / b.c.max(1)).max(1) as usize
    } else {
        1
    };
    let cin = if depthwise {
        (ch.div_ceil(mult) + 1).min(c)
    } else {
        c
    };
    let cpg = if depthwise { 1 } else { c };
    let in_rows = ((rows - 1) * b.sh as usize + (b.kh as usize - 1) * b.dh as usize + 1).min(h);
    in_rows * w * cin
        + ch * cpg * (b.kh * b.kw) as usize
        + rows * b.ow as usize * ch
        + PARAM_BYTES * ch
}

/// Chooses `tile_rows` and `tile_ch` of a convolution.
pub fn plan_conv(b: &mut Conv, depthwise: bool, sram: usize) -> Result<(), String> {
    let (m, oh) = (b.m as usize, b.oh as usize);
    let mut best: Option<(usize, usize, usize)> = None;
    for ch in blocks(m) {
        let Some(rows) = most_rows(oh, sram, |r| conv_tile_bytes(b, depthwise, r, ch)) else {
            continue;
        };
        let tiles = m.div_ceil(ch) * oh.max(1).div_ceil(rows);
        if best.is_none_or(|(t, _, _)| tiles < t) {
            best = Some((tiles, rows, ch));
        }
    }
    let (_, rows, ch) = best.ok_or_else(|| {
        format!(
            "even a tile of one output row and one channel needs {} bytes, the SRAM has {sram}",
            conv_tile_bytes(b, depthwise, 1, 1)
        )
    })?;
    b.tile_rows = rows as u32;
    b.tile_ch = ch as u32;
    Ok(())
}

/// SRAM bytes of a fully connected tile.
pub fn fc_tile_bytes(b: &Fc, rows: usize, cols: usize) -> usize {
    let k = b.k as usize;
    rows * k + cols * k + rows * cols + PARAM_BYTES * cols
}

/// Chooses `tile_rows` and `tile_cols` of a fully connected layer.
pub fn plan_fc(b: &mut Fc, sram: usize) -> Result<(), String> {
    let (rows_all, n) = (b.rows as usize, b.n as usize);
    let mut best: Option<(usize, usize, usize)> = None;
    for cols in blocks(n) {
        let Some(rows) = most_rows(rows_all, sram, |r| fc_tile_bytes(b, r, cols)) else {
            continue;
        };
        let tiles = n.div_ceil(cols) * rows_all.max(1).div_ceil(rows);
        if best.is_none_or(|(t, _, _)| tiles < t) {
            best = Some((tiles, rows, cols));
        }
    }
    let (_, rows, cols) = best.ok_or_else(|| {
        format!(
            "even one row by one column needs {} bytes, the SRAM has {sram}",
            fc_tile_bytes(b, 1, 1)
        )
    })?;
    b.tile_rows = rows as u32;
    b.tile_cols = cols as u32;
    Ok(())
}

/// SRAM bytes of a pooling tile of `rows` output rows over every channel.
pub fn pool_tile_bytes(b: &Pool, rows: usize) -> usize {
    let in_rows = ((rows - 1) * b.sh as usize + b.kh as usize).min(b.h as usize);
    (in_rows * b.w as usize + rows * b.ow as usize) * b.c as usize
}

/// Chooses `tile_rows` of a pooling command.
pub fn plan_pool(b: &mut Pool, sram: usize) -> Result<(), String> {
    let rows = most_rows(b.oh as usize, sram, |r| pool_tile_bytes(b, r)).ok_or_else(|| {
        format!(
            "even one output row needs {} bytes, the SRAM has {sram}",
            pool_tile_bytes(b, 1)
        )
    })?;
    b.tile_rows = rows as u32;
    Ok(())
}

/// Elements per tile of an element-wise command over `buffers` int8 streams.
pub fn stream_tile(sram: usize, buffers: usize) -> u32 {
    (sram / buffers.max(1)).clamp(1, u32::MAX as usize) as u32
}
