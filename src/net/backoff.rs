//! Exponential backoff with jitter, so many clients don't retry a restarted broker in step.

use std::time::Duration;

/// Doubling delays from `initial` up to `max`, each shortened by a random 0–10 %.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
    seed: u64,
}

impl Backoff {
    /// A backoff starting at `initial`, capped at `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9e37_79b9)
            ^ (std::process::id() as u64) << 32;
        Backoff {
            initial,
            max,
            next: initial,
            seed: seed | 1,
        }
    }

    /// The client defaults: 100 ms doubling to 60 s.
    pub fn default_reconnect() -> Self {
        Self::new(Duration::from_millis(100), Duration::from_secs(60))
    }

    /// The delay before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        let current = self.next;
        self.next = (self.next * 2).min(self.max);
        // xorshift: good enough for jitter, no dependency.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let jitter_permille = self.seed % 100;
        current - current * jitter_permille as u32 / 1000
    }

    /// Starts over after a success.
    pub fn reset(&mut self) {
        self.next = self.initial;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_to_the_cap_with_bounded_jitter() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(1000));
        let expected = [100u64, 200, 400, 800, 1000, 1000];
        for e in expected {
            let d = b.next_delay().as_millis() as u64;
            assert!(d <= e && d >= e * 9 / 10, "{d} not within 10% below {e}");
        }
        b.reset();
        assert!(b.next_delay() <= Duration::from_millis(100));
    }
}
