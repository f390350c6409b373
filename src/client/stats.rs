//! Client-side statistics of producers and consumers: relaxed atomic counters bumped where the
//! engine already does the work (a receipt settles, the application takes a message, an ack is
//! queued), read as snapshots by `stats()`, the periodic stats log line and OpenTelemetry.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::net::stats::{bump, read};
pub use crate::net::stats::{Histogram, HistogramSnapshot};

/// One producer partition's counters (the producer handle adds its partitions up).
#[derive(Default)]
pub struct ProducerCounters {
    sent: AtomicU64,
    sent_bytes: AtomicU64,
    failed: AtomicU64,
    /// From the send's write to its receipt, per message (a batch counts once per message).
    latency: Histogram,
    /// The same, one sample per receipt (a batch is one send operation): what OpenTelemetry
    /// replays, so its cost follows receipts, not messages.
    receipts: Histogram,
}

impl ProducerCounters {
    /// `n` messages (`bytes` in all) acknowledged by the broker, `latency` after their write.
    pub fn settled(&self, n: usize, bytes: usize, latency: Duration) {
        self.sent.fetch_add(n as u64, Ordering::Relaxed);
        self.sent_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        if n > 0 {
            self.latency.record_n(latency, n as u64);
            self.receipts.record(latency);
        }
    }

    /// `n` messages failed (timed out, refused, lost with the producer).
    pub fn failed(&self, n: usize) {
        self.failed.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> ProducerStats {
        ProducerStats {
            sent: read(&self.sent),
            sent_bytes: read(&self.sent_bytes),
            failed: read(&self.failed),
            pending: 0,
            latency: self.latency.snapshot(),
            receipt_latency: self.receipts.snapshot(),
        }
    }
}

/// A producer's client-side statistics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProducerStats {
    /// Messages acknowledged by the broker.
    pub sent: u64,
    /// Their bytes (payload and metadata as queued).
    pub sent_bytes: u64,
    /// Messages that failed.
    pub failed: u64,
    /// Messages admitted and not yet settled.
    pub pending: u64,
    /// Receipt latency, one sample per message.
    pub latency: HistogramSnapshot,
    /// Receipt latency, one sample per receipt (per batch).
    pub receipt_latency: HistogramSnapshot,
}

impl ProducerStats {
    /// Adds another partition's figures.
    pub fn merge(&mut self, other: ProducerStats) {
        self.sent += other.sent;
        self.sent_bytes += other.sent_bytes;
        self.failed += other.failed;
        self.pending += other.pending;
        self.latency.merge(other.latency);
        self.receipt_latency.merge(other.receipt_latency);
    }
}

/// A consumer's counters, shared by its partitions and its handle (they live on its inbox).
#[derive(Default)]
pub struct ConsumerCounters {
    received: AtomicU64,
    received_bytes: AtomicU64,
    redelivered: AtomicU64,
    acked: AtomicU64,
    nacked: AtomicU64,
    dead_lettered: AtomicU64,
    acked_before: AtomicU64,
}

impl ConsumerCounters {
    /// The application took a message of `bytes` payload bytes, delivered `redelivery_count`
    /// times before.
    pub fn received(&self, bytes: usize, redelivery_count: u32) {
        bump(&self.received);
        self.received_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        if redelivery_count > 0 {
            bump(&self.redelivered);
        }
    }

    pub fn acked(&self, n: usize) {
        self.acked.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub fn nacked(&self) {
        bump(&self.nacked);
    }

    pub fn dead_lettered(&self) {
        bump(&self.dead_lettered);
    }

    /// The broker sent `n` messages again whose acks it had confirmed (and lost): dropped.
    pub fn acked_before(&self, n: usize) {
        self.acked_before.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> ConsumerClientStats {
        ConsumerClientStats {
            received: read(&self.received),
            received_bytes: read(&self.received_bytes),
            redelivered: read(&self.redelivered),
            acked: read(&self.acked),
            nacked: read(&self.nacked),
            dead_lettered: read(&self.dead_lettered),
            acked_before: read(&self.acked_before),
            queued: 0,
            corrupt: 0,
        }
    }
}

/// A consumer's client-side statistics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConsumerClientStats {
    /// Messages the application took (receive, receive_many, iteration, listener).
    pub received: u64,
    /// Their payload bytes.
    pub received_bytes: u64,
    /// Of those, the ones delivered before (redelivery count above 0).
    pub redelivered: u64,
    /// Acknowledgements queued (a cumulative ack counts once).
    pub acked: u64,
    /// Negative acknowledgements.
    pub nacked: u64,
    /// Messages sent to the dead-letter topic.
    pub dead_lettered: u64,
    /// Messages the broker sent again after it had confirmed their acks (a broker that died
    /// before storing them): dropped, never handed to the application twice, and acked again.
    pub acked_before: u64,
    /// Messages waiting in the receiver queue now.
    pub queued: u64,
    /// Messages discarded as corrupt.
    pub corrupt: u64,
}

/// A client's connection and lookup statistics.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientStats {
    pub connections_opened: u64,
    pub connections_closed: u64,
    pub connections_failed: u64,
    pub connections_open: u64,
    /// Topic lookups (each following its redirects) and their failures.
    pub lookups: u64,
    pub lookups_failed: u64,
    pub lookup_duration: HistogramSnapshot,
    /// Partition-metadata requests and their failures.
    pub metadata_lookups: u64,
    pub metadata_lookups_failed: u64,
}

impl ClientStats {
    pub(crate) fn of(pool: &crate::net::ConnectionPool) -> ClientStats {
        let c = pool.counters();
        let opened = read(&c.connections_opened);
        let open = pool.open_connections().min(opened);
        ClientStats {
            connections_opened: opened,
            connections_closed: opened - open,
            connections_failed: read(&c.connections_failed),
            connections_open: open,
            lookups: read(&c.lookups),
            lookups_failed: read(&c.lookups_failed),
            lookup_duration: c.lookup_duration.snapshot(),
            metadata_lookups: read(&c.metadata_lookups),
            metadata_lookups_failed: read(&c.metadata_lookups_failed),
        }
    }
}

/// The periodic line of a producer, for the `magnetar::producer` logger.
pub(crate) fn producer_line(p: &super::Producer) -> (&'static str, String) {
    let s = p.stats();
    let ms = |q: f64| s.latency.quantile_us(q) as f64 / 1000.0;
    let line = format!(
        "producer {} on {}: pending {}, sent {} ({} bytes), failed {}; latency ms p50 {:.3}, p99 {:.3}, max {:.3}",
        p.name(),
        p.topic(),
        s.pending,
        s.sent,
        s.sent_bytes,
        s.failed,
        ms(0.5),
        ms(0.99),
        s.latency.max_us as f64 / 1000.0,
    );
    ("magnetar::producer", line)
}

/// The periodic line of a consumer, for the `magnetar::consumer` logger.
pub(crate) fn consumer_line(c: &super::Consumer) -> (&'static str, String) {
    let s = c.client_stats();
    let line = format!(
        "consumer {} on {}: received {} ({} bytes, {} redelivered), acked {}, nacked {}, dead-lettered {}, queued {}",
        c.subscription(),
        c.topics().join(","),
        s.received,
        s.received_bytes,
        s.redelivered,
        s.acked,
        s.nacked,
        s.dead_lettered,
        s.queued,
    );
    ("magnetar::consumer", line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_merge() {
        let a = ProducerCounters::default();
        let b = ProducerCounters::default();
        a.settled(3, 30, Duration::from_millis(2));
        b.settled(1, 10, Duration::from_millis(2));
        b.settled(1, 10, Duration::from_millis(40));
        b.failed(2);
        let mut s = a.snapshot();
        s.merge(b.snapshot());
        assert_eq!((s.sent, s.sent_bytes, s.failed), (5, 50, 2));
        assert_eq!(s.latency.count, 5);
        assert_eq!(s.receipt_latency.count, 3);
        assert_eq!(s.latency.buckets.len(), 2);
        assert_eq!(s.latency.max_us, 40_000);
    }

    #[test]
    fn consumer_counts() {
        let c = ConsumerCounters::default();
        c.received(5, 0);
        c.received(7, 2);
        c.acked(2);
        c.nacked();
        c.dead_lettered();
        let s = c.snapshot();
        assert_eq!((s.received, s.received_bytes, s.redelivered), (2, 12, 1));
        assert_eq!((s.acked, s.nacked, s.dead_lettered), (2, 1, 1));
    }
}
