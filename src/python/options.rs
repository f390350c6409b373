//! Options of `_Client`, `_Producer` and `_Consumer` from the dicts that `magnetar._options`
//! builds: every key read here with its type, range and meaning of "no limit".

use std::path::PathBuf;
use std::sync::Arc;

use pyo3::conversion::FromPyObjectOwned;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::auth::PySupplier;
use super::convert::{duration_option, get, payload, string_pairs, NoLimit};
use super::errors::invalid;
use crate::client::crypto::{CryptoFailureAction, KeyReader};
use crate::client::options::{RedeliveryBackoff, TlsOptions, TopicDomains};
use crate::client::{ClientOptions, ConsumerOptions, HashingScheme, InitialPosition, ProducerOptions, RoutingMode};
use crate::net::url::ServiceUrl;
use crate::net::{AuthProvider, StaticAuth, TokenFile};
use crate::protocol::compression::parse_codec;
use crate::protocol::pb::{command_subscribe::SubType, KeySharedMode, ProducerAccessMode};

/// Validates `Client` keyword arguments without making a client, so a `ClientConfig` fails where
/// it is built and not on a remote worker.
#[pyfunction]
pub fn _check_client_options(options: &Bound<'_, PyDict>) -> PyResult<()> {
    client_options(options).map(drop)
}

/// Sets `slot` to the value under `key` when the dict has one (not None).
fn set<'py, T: for<'a> FromPyObjectOwned<'py>>(d: &Bound<'py, PyDict>, key: &str, slot: &mut T) -> PyResult<()> {
    if let Some(v) = get::<T>(d, key)? {
        *slot = v;
    }
    Ok(())
}

fn pairs(d: &Bound<'_, PyDict>, key: &str) -> PyResult<Option<Vec<(String, String)>>> {
    match d.get_item(key)? {
        Some(v) if !v.is_none() => Ok(Some(string_pairs(&v, key)?)),
        _ => Ok(None),
    }
}

/// The keys of `Client`'s options dict (`magnetar._options` builds it; tests/test_option_facts.py
/// holds these lists against its declarations).
pub(super) const CLIENT_KEYS: &[&str] = &[
    "operation_timeout",
    "connect_timeout",
    "keepalive_interval",
    "memory_limit",
    "auth_method",
    "auth_data",
    "auth_supplier",
    "auth_token_file",
    "auth_http_method",
    "initial_backoff",
    "max_backoff",
    "stats_interval",
    "tls_trust_certs_file_path",
    "tls_allow_insecure_connection",
    "tls_validate_hostname",
    "tls_certificate_file_path",
    "tls_private_key_file_path",
    "listener_name",
    "proxy_url",
    "proxy_protocol",
    "enable_transaction",
];

/// The keys of `create_producer`'s options dict.
pub(super) const PRODUCER_KEYS: &[&str] = &[
    "name",
    "batching",
    "batch_max_messages",
    "batch_max_bytes",
    "batch_max_delay",
    "compression",
    "max_pending",
    "max_pending_across_partitions",
    "block_if_full",
    "send_timeout",
    "initial_sequence_id",
    "access_mode",
    "chunking",
    "chunk_max_size",
    "properties",
    "routing_mode",
    "hashing_scheme",
    "partitions_update_interval",
    "batching_type",
    "encryption_keys",
    "crypto_key_reader",
];

/// The keys of `subscribe`'s (and `create_reader`'s) options dict.
pub(super) const CONSUMER_KEYS: &[&str] = &[
    "subscription_type",
    "initial_position",
    "consumer_name",
    "receiver_queue_size",
    "nack_redelivery_delay",
    "ack_timeout",
    "ack_group_time",
    "ack_group_max",
    "durable",
    "start_message_id",
    "start_inclusive",
    "read_compacted",
    "subscription_properties",
    "properties",
    "batch_index_ack",
    "replicate_subscription_state",
    "priority_level",
    "discovery_period",
    "max_redeliver_count",
    "dead_letter_topic",
    "dead_letter_initial_subscription",
    "chunk_expiry",
    "max_pending_chunked_messages",
    "auto_ack_oldest_chunked_message",
    "crypto_key_reader",
    "crypto_failure_action",
    "key_shared_mode",
    "key_shared_ranges",
    "allow_out_of_order_delivery",
    "pattern_topics",
    "enable_retry",
    "retry_letter_topic",
    "nack_backoff",
    "ack_timeout_backoff",
    "start_paused",
    "max_total_receiver_queue_size_across_partitions",
];

/// The values of `access_mode`.
pub(super) const ACCESS_MODE_NAMES: &[(&str, ProducerAccessMode)] = &[
    ("shared", ProducerAccessMode::Shared),
    ("exclusive", ProducerAccessMode::Exclusive),
    ("wait_for_exclusive", ProducerAccessMode::WaitForExclusive),
    ("exclusive_with_fencing", ProducerAccessMode::ExclusiveWithFencing),
];

/// The values of `routing_mode`.
pub(super) const ROUTING_MODE_NAMES: &[(&str, RoutingMode)] = &[
    ("round_robin", RoutingMode::RoundRobin),
    ("single_partition", RoutingMode::SinglePartition),
];

/// The values of `hashing_scheme`.
pub(super) const HASHING_SCHEME_NAMES: &[(&str, HashingScheme)] = &[
    ("java_string", HashingScheme::JavaString),
    ("murmur3", HashingScheme::Murmur3),
    ("murmur3_32", HashingScheme::Murmur3),
];

/// The values of `subscription_type`.
pub(super) const SUBSCRIPTION_TYPE_NAMES: &[(&str, SubType)] = &[
    ("exclusive", SubType::Exclusive),
    ("shared", SubType::Shared),
    ("failover", SubType::Failover),
    ("key_shared", SubType::KeyShared),
];

/// The values of `key_shared_mode`.
pub(super) const KEY_SHARED_MODE_NAMES: &[(&str, KeySharedMode)] = &[
    ("auto_split", KeySharedMode::AutoSplit),
    ("sticky", KeySharedMode::Sticky),
];

/// The values of `pattern_topics`.
pub(super) const PATTERN_TOPICS_NAMES: &[(&str, TopicDomains)] = &[
    ("persistent", TopicDomains::Persistent),
    ("non_persistent", TopicDomains::NonPersistent),
    ("all", TopicDomains::All),
];

/// The values of `initial_position`.
pub(super) const INITIAL_POSITION_NAMES: &[(&str, InitialPosition)] = &[
    ("latest", InitialPosition::Latest),
    ("earliest", InitialPosition::Earliest),
];

/// The values of `batching_type` (key based: one key per batch).
pub(super) const BATCHING_TYPE_NAMES: &[(&str, bool)] = &[("default", false), ("key_based", true)];

/// The values of `crypto_failure_action`.
pub(super) const CRYPTO_FAILURE_ACTION_NAMES: &[(&str, CryptoFailureAction)] = &[
    ("fail", CryptoFailureAction::Fail),
    ("discard", CryptoFailureAction::Discard),
    ("consume", CryptoFailureAction::Consume),
];

/// Sets `slot` to the value named under `key`: one of `names` (in any case, `-` or `_` between
/// words), or `InvalidConfiguration` listing them. `magnetar._options` has already turned the strings
/// into its enums, whose values are these names; this is the engine's own check.
fn choice<T: Copy>(d: &Bound<'_, PyDict>, key: &str, names: &[(&str, T)], slot: &mut T) -> PyResult<()> {
    let Some(v) = get::<String>(d, key)? else {
        return Ok(());
    };
    let wanted = v.to_ascii_lowercase().replace('-', "_");
    match names.iter().find(|(name, _)| *name == wanted) {
        Some((_, value)) => {
            *slot = *value;
            Ok(())
        }
        None => {
            let known: Vec<String> = names.iter().map(|(name, _)| format!("{name:?}")).collect();
            Err(invalid(format!("{key} must be one of {}, not {v:?}", known.join(", "))))
        }
    }
}

fn check_keys(d: &Bound<'_, PyDict>, known: &[&str]) -> PyResult<()> {
    for k in d.keys() {
        let k: String = k.extract()?;
        if !known.contains(&k.as_str()) {
            return Err(invalid(format!("unknown option {k:?}")));
        }
    }
    Ok(())
}

fn positive(v: Option<i64>, key: &str) -> PyResult<Option<usize>> {
    match v {
        Some(n) if n < 1 => Err(invalid(format!("{key} must be at least 1, got {n}"))),
        Some(n) => Ok(Some(n as usize)),
        None => Ok(None),
    }
}

const NEVER_RECONNECTS: &str = "a lost connection would never be retried";

/// Client options from the keyword arguments of `Client`.
pub fn client_options(d: &Bound<'_, PyDict>) -> PyResult<ClientOptions> {
    let mut o = ClientOptions::default();
    check_keys(d, CLIENT_KEYS)?;
    if let Some(v) = duration_option(d, "operation_timeout", NoLimit::Forever, false)? {
        o.connection.operation_timeout = v;
    }
    if let Some(v) = duration_option(d, "connect_timeout", NoLimit::Forever, false)? {
        o.connection.connect_timeout = v;
    }
    // No limit: no pings, so a half-open connection is noticed only by the operation timeout.
    if let Some(v) = duration_option(d, "keepalive_interval", NoLimit::Forever, false)? {
        o.connection.keepalive_interval = v;
    }
    if let Some(v) = duration_option(d, "initial_backoff", NoLimit::Refused(NEVER_RECONNECTS), false)? {
        o.initial_backoff = v;
    }
    if let Some(v) = duration_option(d, "max_backoff", NoLimit::Refused(NEVER_RECONNECTS), false)? {
        o.max_backoff = v;
    }
    if let Some(v) = duration_option(d, "stats_interval", NoLimit::Off, true)? {
        o.stats_interval = v;
    }
    set(d, "enable_transaction", &mut o.enable_transaction)?;
    if let Some(v) = d.get_item("memory_limit")? {
        if !v.is_none() {
            let n: i64 = v
                .extract()
                .map_err(|_| invalid("memory_limit must be an int (bytes)"))?;
            if n < 0 {
                return Err(invalid("memory_limit must be >= 0 (0 disables it)"));
            }
            o.memory_limit = n as usize;
        }
    }
    o.connection.auth = auth_provider(d)?;
    o.connection.listener_name = get::<String>(d, "listener_name")?.filter(|n| !n.is_empty());
    o.connection.sni_proxy = sni_proxy(
        get::<String>(d, "proxy_url")?.filter(|u| !u.is_empty()),
        get::<String>(d, "proxy_protocol")?.filter(|p| !p.is_empty()),
    )?;
    let path =
        |key: &str| -> PyResult<Option<PathBuf>> { Ok(get::<PathBuf>(d, key)?.filter(|p| !p.as_os_str().is_empty())) };
    o.connection.tls = TlsOptions {
        trust_certs_file: path("tls_trust_certs_file_path")?,
        allow_insecure_connection: get::<bool>(d, "tls_allow_insecure_connection")?.unwrap_or(false),
        validate_hostname: get::<bool>(d, "tls_validate_hostname")?.unwrap_or(true),
        certificate_file: path("tls_certificate_file_path")?,
        private_key_file: path("tls_private_key_file_path")?,
    };
    Ok(o)
}

/// `host:port` of an SNI-routing proxy: `proxy_url` must be a one-host `pulsar+ssl://` URL and
/// `proxy_protocol` "sni" (the Java client's `ProxyProtocol.SNI`, its only protocol).
fn sni_proxy(url: Option<String>, protocol: Option<String>) -> PyResult<Option<String>> {
    match (url, protocol) {
        (None, None) => Ok(None),
        (Some(_), None) | (None, Some(_)) => Err(invalid("proxy_url and proxy_protocol go together")),
        (Some(url), Some(p)) => {
            if !p.eq_ignore_ascii_case("sni") {
                return Err(invalid(format!("proxy_protocol must be \"sni\", not {p:?}")));
            }
            let parsed = ServiceUrl::parse(&url).map_err(|e| invalid(e.to_string()))?;
            if !parsed.tls || parsed.http || parsed.hosts.len() != 1 {
                return Err(invalid(format!(
                    "proxy_url must be one pulsar+ssl://host:port (SNI routes TLS), not {url:?}"
                )));
            }
            Ok(parsed.hosts.into_iter().next())
        }
    }
}

/// The credential source: `auth_method` with fixed `auth_data`, a callable `auth_supplier`
/// (called for each connect and challenge), or an `auth_token_file` read each time.
fn auth_provider(d: &Bound<'_, PyDict>) -> PyResult<Option<Arc<dyn AuthProvider>>> {
    let method = get::<String>(d, "auth_method")?;
    let supplier = d.get_item("auth_supplier")?.filter(|v| !v.is_none());
    let token_file = get::<PathBuf>(d, "auth_token_file")?;
    Ok(Some(match (method, supplier, token_file) {
        (None, None, None) => return Ok(None),
        (Some(m), _, _) if m.is_empty() => return Err(invalid("auth_method must not be empty")),
        (_, Some(_), Some(_)) => return Err(invalid("give auth_supplier or auth_token_file, not both")),
        (None, Some(_), None) => return Err(invalid("auth_supplier needs an auth_method")),
        (m, None, Some(path)) => match m.as_deref() {
            None | Some("token") => Arc::new(TokenFile::new(path)),
            Some(_) => return Err(invalid("auth_token_file holds a token: its auth_method is \"token\"")),
        },
        (Some(m), Some(supplier), None) => {
            if !supplier.is_callable() {
                return Err(invalid("auth_supplier must be a callable returning str or bytes"));
            }
            Arc::new(PySupplier::new(m, supplier.unbind()))
        }
        (Some(m), None, None) => {
            let data = match d.get_item("auth_data")? {
                Some(v) if !v.is_none() => payload(&v)?.to_vec(),
                _ => Vec::new(),
            };
            let http = get::<String>(d, "auth_http_method")?.filter(|h| !h.is_empty());
            Arc::new(StaticAuth::new(m, data).with_http_method(http))
        }
    }))
}

/// Producer options from the keyword arguments of `create_producer`.
pub fn producer_options(d: &Bound<'_, PyDict>) -> PyResult<ProducerOptions> {
    check_keys(d, PRODUCER_KEYS)?;
    let mut o = ProducerOptions::default();
    if let Some(v) = get::<String>(d, "name")? {
        o.name = Some(v);
    }
    set(d, "batching", &mut o.batching)?;
    if let Some(v) = positive(get::<i64>(d, "batch_max_messages")?, "batch_max_messages")? {
        o.batch_max_messages = v;
    }
    if let Some(v) = positive(get::<i64>(d, "batch_max_bytes")?, "batch_max_bytes")? {
        o.batch_max_bytes = v;
    }
    if let Some(v) = duration_option(
        d,
        "batch_max_delay",
        NoLimit::Refused("a batch would wait for ever to fill; use batching=False to send each message at once"),
        true,
    )? {
        o.batch_max_delay = v;
    }
    if let Some(v) = get::<String>(d, "compression")? {
        o.compression = parse_codec(&v).ok_or_else(|| {
            invalid(format!(
                "unknown compression {v:?}; use None, \"lz4\", \"zlib\", \"zstd\" or \"snappy\""
            ))
        })?;
    }
    if let Some(v) = positive(get::<i64>(d, "max_pending")?, "max_pending")? {
        o.max_pending = v;
    }
    if let Some(v) = positive(
        get::<i64>(d, "max_pending_across_partitions")?,
        "max_pending_across_partitions",
    )? {
        o.max_pending_across_partitions = Some(v);
    }
    set(d, "block_if_full", &mut o.block_if_full)?;
    if let Some(v) = duration_option(d, "send_timeout", NoLimit::Off, true)? {
        o.send_timeout = v;
    }
    if let Some(v) = get::<i64>(d, "initial_sequence_id")? {
        if v < 0 {
            return Err(invalid("initial_sequence_id must be non-negative"));
        }
        o.initial_sequence_id = Some(v as u64);
    }
    choice(d, "access_mode", ACCESS_MODE_NAMES, &mut o.access_mode)?;
    set(d, "chunking", &mut o.chunking)?;
    o.chunk_max_size = positive(get::<i64>(d, "chunk_max_size")?, "chunk_max_size")?;
    if let Some(v) = pairs(d, "properties")? {
        o.properties = v;
    }
    choice(d, "routing_mode", ROUTING_MODE_NAMES, &mut o.routing_mode)?;
    choice(d, "hashing_scheme", HASHING_SCHEME_NAMES, &mut o.hashing_scheme)?;
    if let Some(v) = duration_option(d, "partitions_update_interval", NoLimit::Forever, false)? {
        o.partitions_update_interval = v;
    }
    choice(d, "batching_type", BATCHING_TYPE_NAMES, &mut o.key_based_batching)?;
    if let Some(v) = d.get_item("encryption_keys")? {
        if let Ok(one) = v.extract::<String>() {
            o.encryption_keys = vec![one];
        } else if !v.is_none() {
            o.encryption_keys = v
                .extract::<Vec<String>>()
                .map_err(|_| invalid("encryption_keys must be a list of key names (str)"))?;
        }
    }
    o.crypto_key_reader = key_reader_option(d)?;
    o.validate().map_err(super::errors::to_pyerr)?;
    Ok(o)
}

/// Consumer options from the keyword arguments of `subscribe`.
pub fn consumer_options(d: &Bound<'_, PyDict>) -> PyResult<ConsumerOptions> {
    check_keys(d, CONSUMER_KEYS)?;
    let mut o = ConsumerOptions::default();
    choice(d, "subscription_type", SUBSCRIPTION_TYPE_NAMES, &mut o.sub_type)?;
    choice(d, "initial_position", INITIAL_POSITION_NAMES, &mut o.initial_position)?;
    if let Some(v) = get::<String>(d, "consumer_name")? {
        o.name = Some(v);
    }
    if let Some(v) = get::<i64>(d, "receiver_queue_size")? {
        if v < 0 {
            return Err(invalid(format!(
                "receiver_queue_size must be at least 0 (0: a zero-queue consumer), got {v}"
            )));
        }
        o.receiver_queue_size = v as usize;
    }
    if let Some(v) = positive(
        get::<i64>(d, "max_total_receiver_queue_size_across_partitions")?,
        "max_total_receiver_queue_size_across_partitions",
    )? {
        o.max_total_receiver_queue_size = v;
    }
    set(d, "enable_retry", &mut o.enable_retry)?;
    o.retry_letter_topic = get::<String>(d, "retry_letter_topic")?;
    o.nack_backoff = backoff_option(d, "nack_backoff")?;
    o.ack_timeout_backoff = backoff_option(d, "ack_timeout_backoff")?;
    set(d, "start_paused", &mut o.start_paused)?;
    if let Some(v) = duration_option(
        d,
        "nack_redelivery_delay",
        NoLimit::Refused("a negatively acknowledged message would never come back"),
        true,
    )? {
        o.nack_redelivery_delay = v;
    }
    if let Some(v) = duration_option(d, "ack_timeout", NoLimit::Off, true)? {
        o.ack_timeout = v;
    }
    if let Some(v) = duration_option(
        d,
        "ack_group_time",
        NoLimit::Refused("acknowledgements would wait until close; use 0 to send each at once"),
        true,
    )? {
        o.ack_group_time = v;
    }
    if let Some(v) = positive(get::<i64>(d, "ack_group_max")?, "ack_group_max")? {
        o.ack_group_max = v;
    }
    set(d, "durable", &mut o.durable)?;
    if let Some(v) = d.get_item("start_message_id")? {
        if !v.is_none() {
            let id = v
                .cast::<super::types::PyMessageId>()
                .map_err(|_| invalid("start_message_id must be a MessageId"))?;
            o.start_message_id = Some(id.get().inner.clone());
        }
    }
    set(d, "start_inclusive", &mut o.start_inclusive)?;
    set(d, "read_compacted", &mut o.read_compacted)?;
    if let Some(v) = pairs(d, "subscription_properties")? {
        o.subscription_properties = v;
    }
    if let Some(v) = pairs(d, "properties")? {
        o.properties = v;
    }
    set(d, "batch_index_ack", &mut o.batch_index_ack)?;
    set(d, "replicate_subscription_state", &mut o.replicate_subscription_state)?;
    set(d, "priority_level", &mut o.priority_level)?;
    if let Some(v) = duration_option(d, "discovery_period", NoLimit::Forever, false)? {
        o.discovery_period = v;
    }
    if let Some(v) = get::<i64>(d, "max_redeliver_count")? {
        if v < 1 {
            return Err(invalid("max_redeliver_count must be at least 1"));
        }
        o.max_redeliver_count = Some(v as u32);
    }
    if let Some(v) = get::<String>(d, "dead_letter_topic")? {
        o.dead_letter_topic = Some(v);
    }
    if let Some(v) = get::<String>(d, "dead_letter_initial_subscription")? {
        o.dead_letter_initial_subscription = Some(v);
    }
    if let Some(v) = duration_option(d, "chunk_expiry", NoLimit::Forever, false)? {
        o.chunk_expiry = v;
    }
    if let Some(v) = get::<i64>(d, "max_pending_chunked_messages")? {
        if v < 1 {
            return Err(invalid("max_pending_chunked_messages must be at least 1"));
        }
        o.max_pending_chunked_messages = v as usize;
    }
    set(
        d,
        "auto_ack_oldest_chunked_message",
        &mut o.auto_ack_oldest_chunked_message,
    )?;
    o.crypto_key_reader = key_reader_option(d)?;
    choice(
        d,
        "crypto_failure_action",
        CRYPTO_FAILURE_ACTION_NAMES,
        &mut o.crypto_failure_action,
    )?;
    choice(d, "key_shared_mode", KEY_SHARED_MODE_NAMES, &mut o.key_shared_mode)?;
    if let Some(v) = d.get_item("key_shared_ranges")? {
        if !v.is_none() {
            o.key_shared_ranges = v
                .extract()
                .map_err(|_| invalid("key_shared_ranges must be a list of (start, end) pairs of ints"))?;
        }
    }
    set(d, "allow_out_of_order_delivery", &mut o.allow_out_of_order_delivery)?;
    choice(d, "pattern_topics", PATTERN_TOPICS_NAMES, &mut o.pattern_domains)?;
    o.validate().map_err(super::errors::to_pyerr)?;
    Ok(o)
}

/// A `magnetar.Backoff` as `magnetar._build` hands it over: `(min_delay, max_delay,
/// multiplier)`, seconds; the class has checked them, this is the engine's own check.
fn backoff_option(d: &Bound<'_, PyDict>, key: &str) -> PyResult<Option<RedeliveryBackoff>> {
    let Some((min, max, multiplier)) = get::<(f64, f64, f64)>(d, key)? else {
        return Ok(None);
    };
    let secs = |v: f64, what: &str| {
        if v.is_finite() && (0.0..=(1u64 << 31) as f64).contains(&v) {
            Ok(std::time::Duration::from_secs_f64(v))
        } else {
            Err(invalid(format!(
                "{key}: {what} must be a number of seconds >= 0, got {v}"
            )))
        }
    };
    let b = RedeliveryBackoff {
        min: secs(min, "min_delay")?,
        max: secs(max, "max_delay")?,
        multiplier,
    };
    b.validate(key).map_err(super::errors::to_pyerr)?;
    Ok(Some(b))
}

fn key_reader_option(d: &Bound<'_, PyDict>) -> PyResult<Option<KeyReader>> {
    match d.get_item("crypto_key_reader")? {
        Some(v) if !v.is_none() => super::crypto::key_reader(&v).map(Some),
        _ => Ok(None),
    }
}
