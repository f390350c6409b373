//! The engine's side of every option fact, for the test that holds it against
//! `magnetar._options`, the one declaration of names, defaults and value names
//! (tests/test_option_facts.py): the keys each options dict may carry, the names each choice
//! takes, and the defaults of the engine's option structs. Python fills in every default before
//! it calls the engine, so these defaults reach only Rust callers; the test keeps them equal.

use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::options::{
    ACCESS_MODE_NAMES, BATCHING_TYPE_NAMES, CLIENT_KEYS, CONSUMER_KEYS, CRYPTO_FAILURE_ACTION_NAMES,
    HASHING_SCHEME_NAMES, INITIAL_POSITION_NAMES, KEY_SHARED_MODE_NAMES, PATTERN_TOPICS_NAMES, PRODUCER_KEYS,
    ROUTING_MODE_NAMES, SUBSCRIPTION_TYPE_NAMES,
};
use crate::client::{ClientOptions, ConsumerOptions, ProducerOptions};
use crate::protocol::compression::CODEC_NAMES;

/// Each name of a choice with the name of its value's first spelling (an alias maps to the
/// name it stands for).
fn names<T: PartialEq>(table: &[(&'static str, T)]) -> Vec<(&'static str, &'static str)> {
    table
        .iter()
        .map(|(name, v)| {
            let first = table.iter().find(|(_, w)| w == v).map_or(*name, |(n, _)| *n);
            (*name, first)
        })
        .collect()
}

/// The first name of `value` in `table`.
fn name_of<T: PartialEq>(table: &[(&'static str, T)], value: &T) -> Option<&'static str> {
    table.iter().find(|(_, v)| v == value).map(|(n, _)| *n)
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// `{"keys": {"client": [...], ...}, "values": {option: [(name, canonical name)]}, "defaults":
/// {"client": {...}, "producer": {...}, "consumer": {...}}}`; durations in seconds, choices by
/// name.
#[pyfunction]
pub fn _engine_option_facts(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let keys = PyDict::new(py);
    keys.set_item("client", CLIENT_KEYS)?;
    keys.set_item("producer", PRODUCER_KEYS)?;
    keys.set_item("consumer", CONSUMER_KEYS)?;

    let values = PyDict::new(py);
    values.set_item("compression", names(CODEC_NAMES))?;
    values.set_item("access_mode", names(ACCESS_MODE_NAMES))?;
    values.set_item("routing_mode", names(ROUTING_MODE_NAMES))?;
    values.set_item("hashing_scheme", names(HASHING_SCHEME_NAMES))?;
    values.set_item("batching_type", names(BATCHING_TYPE_NAMES))?;
    values.set_item("subscription_type", names(SUBSCRIPTION_TYPE_NAMES))?;
    values.set_item("initial_position", names(INITIAL_POSITION_NAMES))?;
    values.set_item("key_shared_mode", names(KEY_SHARED_MODE_NAMES))?;
    values.set_item("pattern_topics", names(PATTERN_TOPICS_NAMES))?;
    values.set_item("crypto_failure_action", names(CRYPTO_FAILURE_ACTION_NAMES))?;

    let c = ClientOptions::default();
    let client = PyDict::new(py);
    client.set_item("operation_timeout", secs(c.connection.operation_timeout))?;
    client.set_item("connect_timeout", secs(c.connection.connect_timeout))?;
    client.set_item("keepalive_interval", secs(c.connection.keepalive_interval))?;
    client.set_item("memory_limit", c.memory_limit)?;
    client.set_item("initial_backoff", secs(c.initial_backoff))?;
    client.set_item("max_backoff", secs(c.max_backoff))?;
    client.set_item("stats_interval", secs(c.stats_interval))?;
    client.set_item("enable_transaction", c.enable_transaction)?;
    client.set_item("listener_name", c.connection.listener_name)?;
    client.set_item(
        "tls_allow_insecure_connection",
        c.connection.tls.allow_insecure_connection,
    )?;
    client.set_item("tls_validate_hostname", c.connection.tls.validate_hostname)?;

    let p = ProducerOptions::default();
    let producer = PyDict::new(py);
    producer.set_item("name", p.name)?;
    producer.set_item("batching", p.batching)?;
    producer.set_item("batch_max_messages", p.batch_max_messages)?;
    producer.set_item("batch_max_bytes", p.batch_max_bytes)?;
    producer.set_item("batch_max_delay", secs(p.batch_max_delay))?;
    producer.set_item("compression", name_of(CODEC_NAMES, &p.compression))?;
    producer.set_item("max_pending", p.max_pending)?;
    producer.set_item("max_pending_across_partitions", p.max_pending_across_partitions)?;
    producer.set_item("block_if_full", p.block_if_full)?;
    producer.set_item("send_timeout", secs(p.send_timeout))?;
    producer.set_item("initial_sequence_id", p.initial_sequence_id)?;
    producer.set_item("access_mode", name_of(ACCESS_MODE_NAMES, &p.access_mode))?;
    producer.set_item("chunking", p.chunking)?;
    producer.set_item("chunk_max_size", p.chunk_max_size)?;
    producer.set_item("routing_mode", name_of(ROUTING_MODE_NAMES, &p.routing_mode))?;
    producer.set_item("hashing_scheme", name_of(HASHING_SCHEME_NAMES, &p.hashing_scheme))?;
    producer.set_item("batching_type", name_of(BATCHING_TYPE_NAMES, &p.key_based_batching))?;
    producer.set_item("partitions_update_interval", secs(p.partitions_update_interval))?;

    let o = ConsumerOptions::default();
    let consumer = PyDict::new(py);
    consumer.set_item("subscription_type", name_of(SUBSCRIPTION_TYPE_NAMES, &o.sub_type))?;
    consumer.set_item("initial_position", name_of(INITIAL_POSITION_NAMES, &o.initial_position))?;
    consumer.set_item("consumer_name", o.name)?;
    consumer.set_item("receiver_queue_size", o.receiver_queue_size)?;
    consumer.set_item("nack_redelivery_delay", secs(o.nack_redelivery_delay))?;
    consumer.set_item("ack_timeout", secs(o.ack_timeout))?;
    consumer.set_item("ack_group_time", secs(o.ack_group_time))?;
    consumer.set_item("ack_group_max", o.ack_group_max)?;
    consumer.set_item("start_inclusive", o.start_inclusive)?;
    consumer.set_item("read_compacted", o.read_compacted)?;
    consumer.set_item("batch_index_ack", o.batch_index_ack)?;
    consumer.set_item("priority_level", o.priority_level)?;
    consumer.set_item("discovery_period", secs(o.discovery_period))?;
    consumer.set_item("max_redeliver_count", o.max_redeliver_count)?;
    consumer.set_item("dead_letter_topic", o.dead_letter_topic)?;
    consumer.set_item("dead_letter_initial_subscription", o.dead_letter_initial_subscription)?;
    consumer.set_item("chunk_expiry", secs(o.chunk_expiry))?;
    consumer.set_item("max_pending_chunked_messages", o.max_pending_chunked_messages)?;
    consumer.set_item("auto_ack_oldest_chunked_message", o.auto_ack_oldest_chunked_message)?;
    consumer.set_item(
        "crypto_failure_action",
        name_of(CRYPTO_FAILURE_ACTION_NAMES, &o.crypto_failure_action),
    )?;
    consumer.set_item("key_shared_mode", name_of(KEY_SHARED_MODE_NAMES, &o.key_shared_mode))?;
    consumer.set_item("allow_out_of_order_delivery", o.allow_out_of_order_delivery)?;
    consumer.set_item("pattern_topics", name_of(PATTERN_TOPICS_NAMES, &o.pattern_domains))?;
    consumer.set_item("enable_retry", o.enable_retry)?;
    consumer.set_item("retry_letter_topic", o.retry_letter_topic)?;
    consumer.set_item("start_paused", o.start_paused)?;
    consumer.set_item(
        "max_total_receiver_queue_size_across_partitions",
        o.max_total_receiver_queue_size,
    )?;

    let defaults = PyDict::new(py);
    defaults.set_item("client", client)?;
    defaults.set_item("producer", producer)?;
    defaults.set_item("consumer", consumer)?;

    let out = PyDict::new(py);
    out.set_item("keys", keys)?;
    out.set_item("values", values)?;
    out.set_item("defaults", defaults)?;
    Ok(out)
}
