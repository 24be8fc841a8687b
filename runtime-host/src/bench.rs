//! Latency measurement of a loaded model: warm-up, then timed runs, summarised by order
//! statistics (median, p90, min) rather than the mean, which one preempted run skews.
//!
//! `baton bench` prints this; the criterion benches in `benches/` measure kernels and give
//! confidence intervals, this gives the figure an integrator compares with other runtimes
//! on the same inputs.

use std::time::Instant;

use baton_delegate_api::Tensor;

use crate::error::Result;
use crate::exec::Session;

/// Timings of one benchmark, in milliseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchReport {
    pub warmup: usize,
    /// Every timed run, in order.
    pub samples_ms: Vec<f64>,
    pub median_ms: f64,
    pub p90_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
}

/// Runs `session` `warmup` times untimed, then `runs` (≥ 1) times timed.
pub fn measure(
    session: &mut Session<'_>,
    inputs: &[Tensor],
    warmup: usize,
    runs: usize,
) -> Result<BenchReport> {
    let refs: Vec<&Tensor> = inputs.iter().collect();
    for _ in 0..warmup {
        session.run_refs(&refs)?;
    }
    let mut samples_ms = Vec::with_capacity(runs.max(1));
    for _ in 0..runs.max(1) {
        let t = Instant::now();
        let out = session.run_refs(&refs)?;
        samples_ms.push(t.elapsed().as_secs_f64() * 1e3);
        drop(out);
    }
    Ok(summarize(warmup, samples_ms))
}

/// The report of given samples (non-empty).
pub fn summarize(warmup: usize, samples_ms: Vec<f64>) -> BenchReport {
    let mut sorted = samples_ms.clone();
    sorted.sort_by(f64::total_cmp);
    let mean_ms = sorted.iter().sum::<f64>() / sorted.len() as f64;
    BenchReport {
        warmup,
        median_ms: percentile(&sorted, 50.0),
        p90_ms: percentile(&sorted, 90.0),
        min_ms: sorted[0],
        max_ms: sorted[sorted.len() - 1],
        mean_ms,
        samples_ms,
    }
}

/// Percentile `p` (0..=100) of ascending `sorted` samples, interpolated linearly between
/// the two nearest ranks (numpy's default), so the median of an even count is the mean of
/// the middle two.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let pos = (sorted.len() - 1) as f64 * (p / 100.0).clamp(0.0, 1.0);
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_like_numpy() {
        let s = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&s, 50.0), 2.5);
        assert_eq!(percentile(&s, 0.0), 1.0);
        assert_eq!(percentile(&s, 100.0), 4.0);
        // numpy.percentile([1,2,3,4], 90) == 3.7
        assert!((percentile(&s, 90.0) - 3.7).abs() < 1e-12);
        assert_eq!(percentile(&[7.0], 90.0), 7.0);
    }

    #[test]
    fn the_summary_uses_order_statistics() {
        let r = summarize(2, vec![5.0, 1.0, 100.0, 2.0, 3.0]);
        assert_eq!(r.median_ms, 3.0);
        assert_eq!(r.min_ms, 1.0);
        assert_eq!(r.max_ms, 100.0);
        assert_eq!(r.mean_ms, 22.2);
        assert_eq!(r.samples_ms, vec![5.0, 1.0, 100.0, 2.0, 3.0]);
    }
}
