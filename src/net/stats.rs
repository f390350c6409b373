//! Counters that cost an atomic add: a fixed-bucket latency histogram, and the connection and
//! lookup counters of one connection pool. Readers take snapshots; nothing here allocates on
//! the recording path.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Sub-buckets per power of two: bucket bounds are about 19% apart.
const SUB: u32 = 4;
/// Buckets in all: from 1 microsecond to 2^40 microseconds (about 12 days).
const BUCKETS: usize = (40 * SUB) as usize;

/// A latency histogram over microseconds with log-spaced fixed buckets (4 per power of two),
/// recorded with relaxed atomic adds.
pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    sum_us: AtomicU64,
    max_us: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            sum_us: AtomicU64::new(0),
            max_us: AtomicU64::new(0),
        }
    }
}

/// The bucket of `us` microseconds.
fn bucket_of(us: u64) -> usize {
    if us < u64::from(SUB) {
        return us as usize;
    }
    let msb = 63 - us.leading_zeros();
    let sub = (us >> (msb - 2)) & u64::from(SUB - 1);
    ((msb * SUB) as usize + sub as usize).min(BUCKETS - 1)
}

/// The highest value (microseconds) bucket `i` holds.
fn upper_bound(i: usize) -> u64 {
    if i < 2 * SUB as usize {
        // Buckets 4..8 stay empty: values below 4 have buckets of their own.
        return (i as u64).min(u64::from(SUB) - 1);
    }
    let msb = i as u32 / SUB;
    let sub = u64::from(i as u32 % SUB);
    ((SUB as u64 + sub + 1) << (msb - 2)) - 1
}

/// A copy of a histogram at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistogramSnapshot {
    /// Non-empty buckets as (highest value in microseconds, count), lowest first.
    pub buckets: Vec<(u64, u64)>,
    pub count: u64,
    pub sum_us: u64,
    pub max_us: u64,
}

impl HistogramSnapshot {
    /// The value (microseconds) at quantile `q` (0..=1): the upper bound of the bucket it falls
    /// in, capped by the maximum seen; 0 when empty.
    pub fn quantile_us(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for &(bound, n) in &self.buckets {
            seen += n;
            if seen >= rank {
                return bound.min(self.max_us);
            }
        }
        self.max_us
    }

    /// Adds another histogram's samples.
    pub fn merge(&mut self, other: HistogramSnapshot) {
        let mut buckets = std::mem::take(&mut self.buckets);
        buckets.extend(other.buckets);
        buckets.sort_unstable();
        for (bound, n) in buckets {
            match self.buckets.last_mut() {
                Some(last) if last.0 == bound => last.1 += n,
                _ => self.buckets.push((bound, n)),
            }
        }
        self.count += other.count;
        self.sum_us += other.sum_us;
        self.max_us = self.max_us.max(other.max_us);
    }

    /// The mean in microseconds; 0 when empty.
    pub fn mean_us(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_us as f64 / self.count as f64
        }
    }
}

impl Histogram {
    pub fn record(&self, d: Duration) {
        self.record_n(d, 1);
    }

    /// Records `n` samples of `d` at once (the messages of one batch).
    pub fn record_n(&self, d: Duration, n: u64) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.buckets[bucket_of(us)].fetch_add(n, Ordering::Relaxed);
        self.sum_us.fetch_add(us.saturating_mul(n), Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let buckets = self
            .buckets
            .iter()
            .enumerate()
            .filter_map(|(i, b)| match b.load(Ordering::Relaxed) {
                0 => None,
                n => Some((upper_bound(i), n)),
            })
            .collect::<Vec<_>>();
        HistogramSnapshot {
            count: buckets.iter().map(|b| b.1).sum(),
            buckets,
            sum_us: self.sum_us.load(Ordering::Relaxed),
            max_us: self.max_us.load(Ordering::Relaxed),
        }
    }
}

/// Connection and lookup counters of one pool (one client).
#[derive(Default)]
pub struct NetCounters {
    pub connections_opened: AtomicU64,
    pub connections_failed: AtomicU64,
    pub lookups: AtomicU64,
    pub lookups_failed: AtomicU64,
    pub lookup_duration: Histogram,
    pub metadata_lookups: AtomicU64,
    pub metadata_lookups_failed: AtomicU64,
}

/// Counts one event.
pub fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// Reads a counter.
pub fn read(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_contain_their_values() {
        let mut last = 0;
        for us in [0u64, 1, 3, 4, 5, 7, 8, 100, 1_000, 65_535, 1 << 30, u64::MAX] {
            let i = bucket_of(us);
            assert!(i >= last, "{us}");
            last = i;
            if i < BUCKETS - 1 {
                assert!(upper_bound(i) >= us, "{us} above bucket {i} bound {}", upper_bound(i));
                assert!(i == 0 || upper_bound(i - 1) < us, "{us} below bucket {i}");
            }
        }
    }

    #[test]
    fn quantiles_are_within_a_bucket() {
        let h = Histogram::default();
        for ms in 1..=100u64 {
            h.record(Duration::from_millis(ms));
        }
        let s = h.snapshot();
        assert_eq!(s.count, 100);
        assert_eq!(s.max_us, 100_000);
        let p50 = s.quantile_us(0.5) as f64;
        assert!((50_000.0..=50_000.0 * 1.25).contains(&p50), "{p50}");
        assert_eq!(s.quantile_us(1.0), 100_000);
        assert!((s.mean_us() - 50_500.0).abs() < 1.0);
        assert_eq!(HistogramSnapshot::default().quantile_us(0.99), 0);
    }
}
