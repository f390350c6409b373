//! Options of clients, producers and consumers, validated before anything is created.

use std::time::Duration;

use super::crypto::{CryptoFailureAction, KeyReader};
use super::error::{Error, Result};
use crate::net::ConnectionOptions;
/// TLS settings live with the sockets; they are part of the client's options.
pub use crate::net::TlsOptions;
/// Which domains (persistent, non-persistent) a pattern subscription covers.
pub use crate::protocol::pb::command_get_topics_of_namespace::Mode as TopicDomains;
use crate::protocol::pb::{command_subscribe::SubType, CompressionType, KeySharedMode, ProducerAccessMode};
pub use crate::protocol::schema::SchemaInfo;

/// Client-wide settings.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Connection settings (timeouts, keepalive, authentication, TLS).
    pub connection: ConnectionOptions,
    /// Bytes of pending outgoing messages across producers; 0 disables the limit.
    pub memory_limit: usize,
    /// First reconnect delay.
    pub initial_backoff: Duration,
    /// Longest reconnect delay.
    pub max_backoff: Duration,
    /// How often each producer and consumer logs a statistics line; zero: never.
    pub stats_interval: Duration,
    /// Other clusters to fail over to, given as service URLs (see `net::failover`).
    pub failover: Option<FailoverOptions>,
    /// Keep a session open with every transaction coordinator from the start, reopened
    /// whenever its connection is lost (see `transaction::keep_coordinators_connected`).
    pub enable_transaction: bool,
}

/// Automatic cluster failover: the service URL is the primary's.
#[derive(Debug, Clone)]
pub struct FailoverOptions {
    /// Service URLs of the clusters to fall back on, in order of preference.
    pub secondaries: Vec<String>,
    /// Time between probes.
    pub check_interval: Duration,
    /// How long the cluster in use must stay unreachable before another is chosen.
    pub failover_delay: Duration,
    /// How long the primary must stay reachable before it is used again.
    pub switch_back_delay: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connection: ConnectionOptions::default(),
            memory_limit: 64 * 1024 * 1024,
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(60),
            stats_interval: Duration::ZERO,
            failover: None,
            enable_transaction: false,
        }
    }
}

/// How a partitioned producer picks a partition for a message without a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoutingMode {
    /// Keyless messages rotate over partitions, one batch at a time.
    RoundRobin,
    /// Keyless messages all go to one partition, chosen at random once.
    SinglePartition,
}

/// Which hash maps a key to a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashingScheme {
    /// Java's `String.hashCode` (the Java client's default).
    JavaString,
    /// Murmur3 32-bit.
    Murmur3,
}

/// Producer settings.
#[derive(Debug, Clone)]
pub struct ProducerOptions {
    /// Producer name; the broker picks one when `None`.
    pub name: Option<String>,
    /// A subscription the broker creates with the topic when this producer creates it
    /// (`CommandProducer.initial_subscription_name`; the dead-letter producers use it).
    pub initial_subscription: Option<String>,
    /// Group messages into batches.
    pub batching: bool,
    /// Most messages in one batch.
    pub batch_max_messages: usize,
    /// Most payload bytes in one batch.
    pub batch_max_bytes: usize,
    /// Longest a message waits in an open batch.
    pub batch_max_delay: Duration,
    /// Payload codec.
    pub compression: CompressionType,
    /// Most messages sent but not yet acknowledged by the broker.
    pub max_pending: usize,
    /// Of a partitioned topic: most messages pending over all partitions, shared out evenly
    /// when the producer starts (each partition takes `min(max_pending, this / partitions)`,
    /// as the Java and C++ clients do).
    pub max_pending_across_partitions: Option<usize>,
    /// When the queue is full: wait (`true`) or fail with `ProducerQueueFull`.
    pub block_if_full: bool,
    /// A send not acknowledged within this fails with a timeout; zero disables it.
    pub send_timeout: Duration,
    /// Sequence id of the first message (then +1 each).
    pub initial_sequence_id: Option<u64>,
    /// Access mode.
    pub access_mode: ProducerAccessMode,
    /// Split messages larger than the broker's limit into chunks.
    pub chunking: bool,
    /// With `chunking`: most payload bytes per chunk (a message larger is chunked even below
    /// the broker's limit); none: as many as the broker's limit allows.
    pub chunk_max_size: Option<usize>,
    /// Producer properties (metadata shown in topic stats).
    pub properties: Vec<(String, String)>,
    /// Routing for partitioned topics.
    pub routing_mode: RoutingMode,
    /// Key hash for partitioned topics.
    pub hashing_scheme: HashingScheme,
    /// How often a partitioned producer checks for added partitions.
    pub partitions_update_interval: Duration,
    /// Group batches by key (for Key_Shared consumers) instead of one batch for all keys.
    pub key_based_batching: bool,
    /// The schema announced to the broker (none: bytes).
    pub schema: Option<SchemaInfo>,
    /// Names of the public keys each message's data key is encrypted for; empty: no
    /// end-to-end encryption.
    pub encryption_keys: Vec<String>,
    /// Supplies the keys of `encryption_keys`.
    pub crypto_key_reader: Option<KeyReader>,
}

impl Default for ProducerOptions {
    fn default() -> Self {
        ProducerOptions {
            name: None,
            initial_subscription: None,
            batching: true,
            batch_max_messages: 1000,
            batch_max_bytes: 128 * 1024,
            batch_max_delay: Duration::from_millis(10),
            compression: CompressionType::None,
            max_pending: 1000,
            max_pending_across_partitions: None,
            block_if_full: true,
            send_timeout: Duration::from_secs(30),
            initial_sequence_id: None,
            access_mode: ProducerAccessMode::Shared,
            chunking: false,
            chunk_max_size: None,
            properties: Vec::new(),
            routing_mode: RoutingMode::RoundRobin,
            hashing_scheme: HashingScheme::JavaString,
            partitions_update_interval: Duration::from_secs(60),
            key_based_batching: false,
            schema: None,
            encryption_keys: Vec::new(),
            crypto_key_reader: None,
        }
    }
}

impl ProducerOptions {
    /// Checks value ranges.
    pub fn validate(&self) -> Result<()> {
        if self.batch_max_messages == 0 {
            return Err(Error::invalid("batch_max_messages must be at least 1"));
        }
        if self.batch_max_bytes == 0 {
            return Err(Error::invalid("batch_max_bytes must be at least 1"));
        }
        if self.max_pending == 0 {
            return Err(Error::invalid("max_pending must be at least 1"));
        }
        if let Some(n) = &self.name {
            if n.is_empty() {
                return Err(Error::invalid("producer name must not be empty"));
            }
        }
        if self.encryption_keys.iter().any(String::is_empty) {
            return Err(Error::invalid("encryption key names must not be empty"));
        }
        match (self.encryption_keys.is_empty(), self.crypto_key_reader.is_some()) {
            (false, false) => Err(Error::invalid(
                "encryption_keys needs a crypto_key_reader to supply the keys",
            )),
            (true, true) => Err(Error::invalid(
                "crypto_key_reader without encryption_keys encrypts nothing; name the keys to encrypt for",
            )),
            _ => Ok(()),
        }
    }
}

/// Where a new subscription starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitialPosition {
    /// At the next message published.
    Latest,
    /// At the oldest message kept.
    Earliest,
}

/// Consumer settings.
#[derive(Debug, Clone)]
pub struct ConsumerOptions {
    /// Subscription type.
    pub sub_type: SubType,
    /// Where a new subscription starts.
    pub initial_position: InitialPosition,
    /// Consumer name; random when `None`.
    pub name: Option<String>,
    /// Messages the broker may push ahead of the application.
    pub receiver_queue_size: usize,
    /// Delay before a nacked message is redelivered.
    pub nack_redelivery_delay: Duration,
    /// Unacked messages are redelivered after this; zero disables it.
    pub ack_timeout: Duration,
    /// Individual acks are grouped for this long (zero sends each at once).
    pub ack_group_time: Duration,
    /// Most acks in one group.
    pub ack_group_max: usize,
    /// Durable subscription (false for readers).
    pub durable: bool,
    /// Start position of a non-durable subscription (readers).
    pub start_message_id: Option<super::message_id::MessageId>,
    /// Deliver the start message itself (readers).
    pub start_inclusive: bool,
    /// Read the compacted view of the topic.
    pub read_compacted: bool,
    /// Subscription properties.
    pub subscription_properties: Vec<(String, String)>,
    /// Consumer metadata.
    pub properties: Vec<(String, String)>,
    /// Ack batch entries one index at a time (needs the broker's batch index ack).
    pub batch_index_ack: bool,
    /// Replicate the subscription state across clusters.
    pub replicate_subscription_state: bool,
    /// Consumer priority for Shared subscriptions (lower is higher).
    pub priority_level: i32,
    /// Period of the pattern and partition re-check.
    pub discovery_period: Duration,
    /// Dead-letter policy: after this many redeliveries a message goes to `dead_letter_topic`.
    pub max_redeliver_count: Option<u32>,
    /// Dead-letter topic (default `<topic>-<subscription>-DLQ`).
    pub dead_letter_topic: Option<String>,
    /// A subscription the dead-letter topic is created with (by its producer), so that what is
    /// dead-lettered before anyone subscribes there is kept.
    pub dead_letter_initial_subscription: Option<String>,
    /// A chunked message still incomplete after this long is given up: its chunks are acked.
    pub chunk_expiry: Duration,
    /// Most chunked messages reassembled at once; beyond it the oldest is given up.
    pub max_pending_chunked_messages: usize,
    /// The oldest chunked message given up for `max_pending_chunked_messages` is acked
    /// (true) or left unacknowledged for redelivery (the Java client's
    /// `autoAckOldestChunkedMessageOnQueueFull`, false there).
    pub auto_ack_oldest_chunked_message: bool,
    /// Told of active-consumer changes and of the redeliveries the consumer asks for.
    pub event_hook: Option<super::events::EventHook>,
    /// The schema announced to the broker on subscribe (none: bytes).
    pub schema: Option<SchemaInfo>,
    /// Supplies the private keys that decrypt end-to-end encrypted messages.
    pub crypto_key_reader: Option<KeyReader>,
    /// What becomes of a message that cannot be decrypted.
    pub crypto_failure_action: CryptoFailureAction,
    /// Key_Shared: `AutoSplit` (the broker splits the hash space among consumers) or
    /// `Sticky` (this consumer takes `key_shared_ranges`).
    pub key_shared_mode: KeySharedMode,
    /// Key_Shared `Sticky`: the inclusive hash ranges (within 0..=65535) this consumer takes.
    pub key_shared_ranges: Vec<(i32, i32)>,
    /// Key_Shared: the broker may deliver a key's messages while earlier ones of that key
    /// are still unacknowledged by a consumer that left.
    pub allow_out_of_order_delivery: bool,
    /// Which topics a pattern subscription looks at: persistent, non-persistent, or both.
    pub pattern_domains: TopicDomains,
    /// The retry letter topic (the Java client's `enableRetry`): the consumer subscribes to it
    /// too, and `reconsume_later` publishes there. Default when on: `<topic>-<subscription>-RETRY`.
    pub enable_retry: bool,
    /// The retry letter topic's name, when not the default.
    pub retry_letter_topic: Option<String>,
    /// The delay of a negatively acked message from its redelivery count, instead of
    /// `nack_redelivery_delay`.
    pub nack_backoff: Option<RedeliveryBackoff>,
    /// The ack timeout of a message from its redelivery count, instead of `ack_timeout`
    /// (which must be on).
    pub ack_timeout_backoff: Option<RedeliveryBackoff>,
    /// Subscribe without granting the broker any permit until `set_paused(false)`.
    pub start_paused: bool,
    /// The receiver queues of a consumer of several partitions or topics together: each gets
    /// `min(receiver_queue_size, this / count)` (at least 1).
    pub max_total_receiver_queue_size: usize,
}

/// A redelivery delay growing with the redelivery count, as the Java client's
/// `MultiplierRedeliveryBackoff`: `min * multiplier^count`, within `min..=max`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RedeliveryBackoff {
    /// The delay of a first delivery (redelivery count 0).
    pub min: Duration,
    /// The longest delay.
    pub max: Duration,
    /// The growth per redelivery (above 1).
    pub multiplier: f64,
}

impl RedeliveryBackoff {
    /// The delay for a message delivered `redelivery_count` times before.
    pub fn next(&self, redelivery_count: u32) -> Duration {
        if redelivery_count == 0 || self.min.is_zero() {
            return self.min;
        }
        let grown = self.min.as_secs_f64() * self.multiplier.powi(redelivery_count.min(1024) as i32);
        if !grown.is_finite() || grown >= self.max.as_secs_f64() {
            return self.max;
        }
        Duration::from_secs_f64(grown).clamp(self.min, self.max)
    }

    /// Checks the bounds and the multiplier.
    pub fn validate(&self, what: &str) -> Result<()> {
        if self.max < self.min {
            return Err(Error::invalid(format!("{what}: max_delay must be at least min_delay")));
        }
        if !(self.multiplier.is_finite() && self.multiplier >= 1.0) {
            return Err(Error::invalid(format!("{what}: multiplier must be a number >= 1")));
        }
        Ok(())
    }
}

impl Default for ConsumerOptions {
    fn default() -> Self {
        ConsumerOptions {
            sub_type: SubType::Exclusive,
            initial_position: InitialPosition::Latest,
            name: None,
            receiver_queue_size: 1000,
            nack_redelivery_delay: Duration::from_secs(60),
            ack_timeout: Duration::ZERO,
            ack_group_time: Duration::from_millis(100),
            ack_group_max: 1000,
            durable: true,
            start_message_id: None,
            start_inclusive: false,
            read_compacted: false,
            subscription_properties: Vec::new(),
            properties: Vec::new(),
            batch_index_ack: false,
            replicate_subscription_state: false,
            priority_level: 0,
            discovery_period: Duration::from_secs(60),
            max_redeliver_count: None,
            dead_letter_topic: None,
            dead_letter_initial_subscription: None,
            // The Java client's defaults (expireTimeOfIncompleteChunkedMessage,
            // maxPendingChunkedMessage).
            chunk_expiry: Duration::from_secs(60),
            max_pending_chunked_messages: 10,
            auto_ack_oldest_chunked_message: true,
            event_hook: None,
            schema: None,
            crypto_key_reader: None,
            crypto_failure_action: CryptoFailureAction::Fail,
            key_shared_mode: KeySharedMode::AutoSplit,
            key_shared_ranges: Vec::new(),
            allow_out_of_order_delivery: false,
            pattern_domains: TopicDomains::Persistent,
            enable_retry: false,
            retry_letter_topic: None,
            nack_backoff: None,
            ack_timeout_backoff: None,
            start_paused: false,
            // The Java client's maxTotalReceiverQueueSizeAcrossPartitions.
            max_total_receiver_queue_size: 50_000,
        }
    }
}

/// The highest key hash of Key_Shared: the broker hashes keys into 0..=65535.
pub const KEY_HASH_MAX: i32 = 65535;

impl ConsumerOptions {
    /// Checks value ranges.
    pub fn validate(&self) -> Result<()> {
        if self.max_total_receiver_queue_size == 0 {
            return Err(Error::invalid(
                "max_total_receiver_queue_size_across_partitions must be at least 1",
            ));
        }
        if self.receiver_queue_size == 0 && self.enable_retry {
            return Err(Error::invalid(
                "receiver_queue_size=0 (a zero-queue consumer) takes one topic; enable_retry subscribes to the retry topic too",
            ));
        }
        if let Some(b) = &self.nack_backoff {
            b.validate("nack_backoff")?;
        }
        if let Some(b) = &self.ack_timeout_backoff {
            b.validate("ack_timeout_backoff")?;
            if self.ack_timeout.is_zero() {
                return Err(Error::invalid(
                    "ack_timeout_backoff needs ack_timeout on: it replaces the ack timeout of redelivered messages",
                ));
            }
        }
        if self.retry_letter_topic.is_some() && !self.enable_retry {
            return Err(Error::invalid("retry_letter_topic needs enable_retry=True"));
        }
        if !self.ack_timeout.is_zero() && self.ack_timeout < Duration::from_secs(1) {
            return Err(Error::invalid("ack_timeout must be 0 (off) or at least 1 second"));
        }
        if self.max_redeliver_count == Some(0) {
            return Err(Error::invalid("max_redeliver_count must be at least 1"));
        }
        if self.max_pending_chunked_messages == 0 {
            return Err(Error::invalid("max_pending_chunked_messages must be at least 1"));
        }
        self.validate_key_shared()
    }

    fn validate_key_shared(&self) -> Result<()> {
        let sticky = self.key_shared_mode == KeySharedMode::Sticky;
        if sticky == self.key_shared_ranges.is_empty() {
            return Err(Error::invalid(
                "key_shared_ranges are given with key_shared_mode=\"sticky\", and sticky needs them",
            ));
        }
        if (sticky || self.allow_out_of_order_delivery) && self.sub_type != SubType::KeyShared {
            return Err(Error::invalid(
                "key_shared_mode and allow_out_of_order_delivery are for key_shared subscriptions",
            ));
        }
        let mut ranges = self.key_shared_ranges.clone();
        ranges.sort_unstable();
        for &(start, end) in &ranges {
            if !(0..=KEY_HASH_MAX).contains(&start) || !(start..=KEY_HASH_MAX).contains(&end) {
                return Err(Error::invalid(format!(
                    "key_shared_ranges: ({start}, {end}) is not an inclusive range within 0..={KEY_HASH_MAX}"
                )));
            }
        }
        if let Some(w) = ranges.windows(2).find(|w| w[1].0 <= w[0].1) {
            return Err(Error::invalid(format!(
                "key_shared_ranges: {:?} and {:?} overlap",
                w[0], w[1]
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LXRva2Vu.sig";

    fn with_token() -> ClientOptions {
        let mut o = ClientOptions::default();
        o.connection.auth = Some(std::sync::Arc::new(crate::net::StaticAuth::new("token", TOKEN)));
        o.connection.tls.private_key_file = Some("/etc/pulsar/client.key.pem".into());
        o
    }

    #[test]
    fn debug_never_prints_credentials() {
        let o = with_token();
        // Bytes would print as a list of numbers, so look for those too.
        let as_numbers = format!("{:?}", TOKEN.as_bytes());
        let inner = &as_numbers[1..as_numbers.len() - 1];
        for printed in [
            format!("{o:?}"),
            format!("{o:#?}"),
            format!("{:?}", o.connection),
            format!("{:?}", o.clone().connection),
        ] {
            assert!(!printed.contains(TOKEN), "{printed}");
            assert!(!printed.contains("c2VjcmV0"), "{printed}");
            assert!(!printed.contains(inner), "{printed}");
            assert!(
                printed.contains("\"token\"") && printed.contains("<redacted>"),
                "{printed}"
            );
        }
        // What is not secret still shows, so the output stays useful.
        let printed = format!("{o:?}");
        assert!(printed.contains("operation_timeout: 30s"), "{printed}");
        assert!(printed.contains("client.key.pem"), "{printed}");
    }

    #[test]
    fn key_shared_ranges_are_checked() {
        let sticky = |ranges: Vec<(i32, i32)>| ConsumerOptions {
            sub_type: SubType::KeyShared,
            key_shared_mode: KeySharedMode::Sticky,
            key_shared_ranges: ranges,
            ..Default::default()
        };
        assert!(sticky(vec![(0, 99), (100, 65535)]).validate().is_ok());
        for bad in [
            vec![],
            vec![(0, 65536)],
            vec![(-1, 5)],
            vec![(10, 5)],
            vec![(50, 100), (0, 50)],
        ] {
            assert!(sticky(bad.clone()).validate().is_err(), "{bad:?}");
        }
        let auto_split_with_ranges = ConsumerOptions {
            key_shared_ranges: vec![(0, 10)],
            ..sticky(vec![])
        };
        let auto_split_with_ranges = ConsumerOptions {
            key_shared_mode: KeySharedMode::AutoSplit,
            ..auto_split_with_ranges
        };
        assert!(auto_split_with_ranges.validate().is_err());
        let shared_out_of_order = ConsumerOptions {
            sub_type: SubType::Shared,
            allow_out_of_order_delivery: true,
            ..Default::default()
        };
        assert!(shared_out_of_order.validate().is_err());
    }

    #[test]
    fn a_backoff_grows_from_min_to_max() {
        let b = RedeliveryBackoff {
            min: Duration::from_millis(100),
            max: Duration::from_secs(1),
            multiplier: 2.0,
        };
        let ms: Vec<u128> = (0..6).map(|n| b.next(n).as_millis()).collect();
        assert_eq!(ms, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(b.next(u32::MAX), Duration::from_secs(1));
        assert!(RedeliveryBackoff { multiplier: 0.5, ..b }.validate("b").is_err());
        assert!(RedeliveryBackoff {
            max: Duration::ZERO,
            ..b
        }
        .validate("b")
        .is_err());
    }

    #[test]
    fn debug_without_credentials_says_none() {
        let printed = format!("{:?}", ClientOptions::default());
        assert!(printed.contains("auth: None"), "{printed}");
    }
}
