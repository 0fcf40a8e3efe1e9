//! Latency summaries.

use serde::Serialize;

/// Percentiles of a set of durations, in milliseconds.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Latency {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub mean_ms: f64,
}

impl Latency {
    /// Nearest-rank percentiles of `seconds`.
    pub fn of(seconds: &mut [f64]) -> Latency {
        if seconds.is_empty() {
            return Latency { p50_ms: 0.0, p99_ms: 0.0, mean_ms: 0.0 };
        }
        seconds.sort_by(f64::total_cmp);
        let at = |p: f64| {
            let rank = ((p / 100.0) * seconds.len() as f64).ceil() as usize;
            seconds[rank.clamp(1, seconds.len()) - 1] * 1e3
        };
        let mean = seconds.iter().sum::<f64>() / seconds.len() as f64 * 1e3;
        Latency { p50_ms: at(50.0), p99_ms: at(99.0), mean_ms: mean }
    }
}
