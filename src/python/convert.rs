//! Python values to engine values: payloads, options, message fields.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use pyo3::buffer::PyBuffer;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDelta, PyDict, PyFloat, PyInt, PyString};

use super::errors::invalid;
use crate::client::options::TlsOptions;
use crate::client::{
    ClientOptions, ConsumerOptions, HashingScheme, InitialPosition, OutgoingMessage, ProducerOptions, RoutingMode,
};
use crate::protocol::compression::parse_codec;
use crate::protocol::pb::{command_subscribe::SubType, ProducerAccessMode};

/// A payload from `bytes`, `str` (UTF-8) or any object with the buffer protocol.
pub fn payload(obj: &Bound<'_, PyAny>) -> PyResult<Bytes> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(Bytes::copy_from_slice(b.as_bytes()));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Bytes::copy_from_slice(s.to_str()?.as_bytes()));
    }
    match PyBuffer::<u8>::get(obj) {
        Ok(buf) => Ok(Bytes::from(buf.to_vec(obj.py())?)),
        Err(_) => Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "payload must be bytes, str or a bytes-like object, not {}",
            obj.get_type().name()?
        ))),
    }
}

/// Many payloads copied into one buffer and sliced, so a `send_many` of small messages makes
/// one allocation instead of one per message.
pub fn payloads(items: &Bound<'_, PyAny>) -> PyResult<Vec<Bytes>> {
    let items: Vec<Bound<'_, PyAny>> = items.try_iter()?.collect::<PyResult<_>>()?;
    let mut total = 0usize;
    let mut all_bytes = true;
    for item in &items {
        match item.cast::<PyBytes>() {
            Ok(b) => total += b.as_bytes().len(),
            Err(_) => all_bytes = false,
        }
    }
    if !all_bytes {
        return items.iter().map(payload).collect();
    }
    let mut arena = bytes::BytesMut::with_capacity(total);
    for item in &items {
        arena.extend_from_slice(item.cast::<PyBytes>().expect("checked above").as_bytes());
    }
    let mut arena = arena.freeze();
    Ok(items
        .iter()
        .map(|item| arena.split_to(item.cast::<PyBytes>().expect("checked above").as_bytes().len()))
        .collect())
}

/// The `(key, value)` pairs of a properties dict of str to str.
pub fn property_pairs(props: &Bound<'_, PyDict>) -> PyResult<Vec<(String, String)>> {
    let mut pairs = Vec::with_capacity(props.len());
    for (k, v) in props.iter() {
        let (Ok(k), Ok(v)) = (k.extract::<String>(), v.extract::<String>()) else {
            return Err(invalid("properties must map str to str"));
        };
        pairs.push((k, v));
    }
    Ok(pairs)
}

/// Builds a message from `send` arguments.
#[allow(clippy::too_many_arguments)]
pub fn message(
    data: &Bound<'_, PyAny>,
    key: Option<String>,
    properties: Option<&Bound<'_, PyDict>>,
    event_time: Option<u64>,
    deliver_at: Option<i64>,
    ordering_key: Option<&Bound<'_, PyAny>>,
    sequence_id: Option<i64>,
) -> PyResult<OutgoingMessage> {
    let mut msg = OutgoingMessage::new(payload(data)?);
    msg.key = key;
    if let Some(props) = properties {
        msg.properties = property_pairs(props)?;
    }
    msg.event_time = event_time;
    msg.deliver_at = deliver_at;
    if let Some(ok) = ordering_key {
        msg.ordering_key = Some(payload(ok)?.to_vec());
    }
    if let Some(seq) = sequence_id {
        if seq < 0 {
            return Err(invalid("sequence_id must be non-negative"));
        }
        msg.sequence_id = Some(seq as u64);
    }
    Ok(msg)
}

fn get<'py, T: for<'a> FromPyObjectOwned<'py>>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<Option<T>> {
    match d.get_item(key)? {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => v
            .extract::<T>()
            .map(Some)
            .map_err(|_| invalid(format!("invalid value for {key}: {v}"))),
    }
}

use pyo3::conversion::FromPyObjectOwned;

/// The longest span the engine is ever handed: 2**31 s, about 68 years. Anything longer means
/// "no limit", and capping there keeps every `Instant + Duration` in the engine far from overflow.
pub const NO_LIMIT: Duration = Duration::from_secs(1 << 31);

/// A duration from a user, before an option decides what "no limit" means for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// At most [`NO_LIMIT`].
    Within(Duration),
    /// `None`, `inf`, or more than [`NO_LIMIT`].
    Unlimited,
}

/// The one reading of every duration a user passes (options and call arguments alike): seconds
/// as an int, a float or a `datetime.timedelta`; `None`, `inf` and anything over 2**31 s are no
/// limit. Negative, NaN and non-numbers raise `InvalidConfiguration` naming `what`, so no value
/// reaches `Duration::from_secs_f64`, which panics on them.
pub fn span(value: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Span> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(Span::Unlimited);
    };
    let Some(secs) = seconds_in(value)? else {
        return Err(invalid(format!(
            "{what} must be a number of seconds, a timedelta or None, not {}",
            value.repr()?
        )));
    };
    if secs.is_nan() || secs < 0.0 {
        return Err(invalid(format!(
            "{what} must not be negative or NaN, got {}",
            value.repr()?
        )));
    }
    if secs > NO_LIMIT.as_secs_f64() {
        return Ok(Span::Unlimited);
    }
    Ok(Span::Within(Duration::from_secs_f64(secs)))
}

fn seconds_in(value: &Bound<'_, PyAny>) -> PyResult<Option<f64>> {
    if let Ok(f) = value.cast::<PyFloat>() {
        return Ok(Some(f.value()));
    }
    if value.is_instance_of::<PyBool>() {
        return Ok(None);
    }
    if let Ok(i) = value.cast::<PyInt>() {
        // An int beyond f64 is still a duration, only a very long (or negative) one.
        return Ok(Some(match i.extract::<f64>() {
            Ok(f) => f,
            Err(_) if i.lt(0)? => f64::NEG_INFINITY,
            Err(_) => f64::INFINITY,
        }));
    }
    if let Ok(delta) = value.cast::<PyDelta>() {
        return Ok(Some(delta.call_method0("total_seconds")?.extract()?));
    }
    // Other numbers (numpy scalars, Decimal, Fraction) through `__float__`.
    Ok(value.extract::<f64>().ok())
}

/// The deadline of a call's `timeout` argument: `None` waits without limit.
pub fn deadline(timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Instant>> {
    Ok(match span(timeout, "timeout")? {
        Span::Within(d) => Some(Instant::now() + d),
        Span::Unlimited => None,
    })
}

/// What "no limit" means for one duration option.
#[derive(Clone, Copy)]
enum NoLimit {
    /// Wait as long as it takes: [`NO_LIMIT`].
    Forever,
    /// The feature is off; the engine reads a zero duration as off (`send_timeout`, `ack_timeout`).
    Off,
    /// A delay that never ends would silently stop the feature: refused, saying why.
    Refused(&'static str),
}

/// A duration option: `None` if the key is absent (the engine's default applies).
fn duration_option(d: &Bound<'_, PyDict>, key: &str, no_limit: NoLimit, zero_ok: bool) -> PyResult<Option<Duration>> {
    let Some(value) = d.get_item(key)? else {
        return Ok(None);
    };
    match (span(Some(&value), key)?, no_limit) {
        (Span::Within(t), _) if t.is_zero() && !zero_ok => Err(invalid(format!("{key} must be more than 0 seconds"))),
        (Span::Within(t), _) => Ok(Some(t)),
        (Span::Unlimited, NoLimit::Forever) => Ok(Some(NO_LIMIT)),
        (Span::Unlimited, NoLimit::Off) => Ok(Some(Duration::ZERO)),
        (Span::Unlimited, NoLimit::Refused(why)) => Err(invalid(format!(
            "{key} must be a finite number of seconds up to 2**31, not {}: {why}",
            value.repr()?
        ))),
    }
}

/// Seconds as Python sees them, for the few durations Python itself waits on (asyncio timeouts,
/// `deliver_after`): `None` for no limit, or InvalidConfiguration when no limit is refused.
#[pyfunction]
#[pyo3(signature = (value, what, unlimited_ok=true))]
pub fn _duration_seconds(value: Option<&Bound<'_, PyAny>>, what: &str, unlimited_ok: bool) -> PyResult<Option<f64>> {
    match span(value, what)? {
        Span::Within(d) => Ok(Some(d.as_secs_f64())),
        Span::Unlimited if unlimited_ok => Ok(None),
        Span::Unlimited => {
            let shown = match value {
                Some(v) => v.repr()?.to_string(),
                None => "None".into(),
            };
            Err(invalid(format!(
                "{what} must be a finite number of seconds up to 2**31, not {shown}"
            )))
        }
    }
}

/// Validates `Client` keyword arguments without making a client, so a `ClientConfig` fails where
/// it is built and not on a remote worker.
#[pyfunction]
pub fn _check_client_options(options: &Bound<'_, PyDict>) -> PyResult<()> {
    client_options(options).map(drop)
}

fn pairs(d: &Bound<'_, PyDict>, key: &str) -> PyResult<Option<Vec<(String, String)>>> {
    match d.get_item(key)? {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => {
            let m = v
                .cast::<PyDict>()
                .map_err(|_| invalid(format!("{key} must be a dict of str to str")))?;
            let mut out = Vec::new();
            for (k, v) in m.iter() {
                out.push((
                    k.extract::<String>()?,
                    v.extract::<String>()
                        .map_err(|_| invalid(format!("{key} values must be str")))?,
                ));
            }
            Ok(Some(out))
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
    for k in d.keys() {
        let k: String = k.extract()?;
        if ![
            "operation_timeout",
            "connect_timeout",
            "keepalive_interval",
            "memory_limit",
            "auth_method",
            "auth_data",
            "initial_backoff",
            "max_backoff",
            "tls_trust_certs_file_path",
            "tls_allow_insecure_connection",
            "tls_validate_hostname",
            "tls_certificate_file_path",
            "tls_private_key_file_path",
        ]
        .contains(&k.as_str())
        {
            return Err(invalid(format!("unknown client option {k:?}")));
        }
    }
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
    if let Some(m) = d.get_item("auth_method")? {
        if !m.is_none() {
            let method: String = m.extract()?;
            let data: Vec<u8> = match d.get_item("auth_data")? {
                Some(v) if !v.is_none() => payload(&v)?.to_vec(),
                _ => Vec::new(),
            };
            o.connection.auth = Some((method, data));
        }
    }
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

/// Producer options from the keyword arguments of `create_producer`.
pub fn producer_options(d: &Bound<'_, PyDict>) -> PyResult<ProducerOptions> {
    check_keys(
        d,
        &[
            "name",
            "batching",
            "batch_max_messages",
            "batch_max_bytes",
            "batch_max_delay",
            "compression",
            "max_pending",
            "block_if_full",
            "send_timeout",
            "initial_sequence_id",
            "access_mode",
            "chunking",
            "properties",
            "routing_mode",
            "hashing_scheme",
            "partitions_update_interval",
            "batching_type",
        ],
    )?;
    let mut o = ProducerOptions::default();
    if let Some(v) = get::<String>(d, "name")? {
        o.name = Some(v);
    }
    if let Some(v) = get::<bool>(d, "batching")? {
        o.batching = v;
    }
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
    if let Some(v) = get::<bool>(d, "block_if_full")? {
        o.block_if_full = v;
    }
    if let Some(v) = duration_option(d, "send_timeout", NoLimit::Off, true)? {
        o.send_timeout = v;
    }
    if let Some(v) = get::<i64>(d, "initial_sequence_id")? {
        if v < 0 {
            return Err(invalid("initial_sequence_id must be non-negative"));
        }
        o.initial_sequence_id = Some(v as u64);
    }
    if let Some(v) = get::<String>(d, "access_mode")? {
        o.access_mode = match v.to_ascii_lowercase().replace('_', "").as_str() {
            "shared" => ProducerAccessMode::Shared,
            "exclusive" => ProducerAccessMode::Exclusive,
            "waitforexclusive" => ProducerAccessMode::WaitForExclusive,
            "exclusivewithfencing" => ProducerAccessMode::ExclusiveWithFencing,
            _ => return Err(invalid(format!("unknown access_mode {v:?}"))),
        };
    }
    if let Some(v) = get::<bool>(d, "chunking")? {
        o.chunking = v;
    }
    if let Some(v) = pairs(d, "properties")? {
        o.properties = v;
    }
    if let Some(v) = get::<String>(d, "routing_mode")? {
        o.routing_mode = match v.to_ascii_lowercase().as_str() {
            "round_robin" => RoutingMode::RoundRobin,
            "single_partition" => RoutingMode::SinglePartition,
            _ => {
                return Err(invalid(format!(
                    "unknown routing_mode {v:?}; use \"round_robin\" or \"single_partition\""
                )))
            }
        };
    }
    if let Some(v) = get::<String>(d, "hashing_scheme")? {
        o.hashing_scheme = match v.to_ascii_lowercase().as_str() {
            "java_string" => HashingScheme::JavaString,
            "murmur3" | "murmur3_32" => HashingScheme::Murmur3,
            _ => {
                return Err(invalid(format!(
                    "unknown hashing_scheme {v:?}; use \"java_string\" or \"murmur3\""
                )))
            }
        };
    }
    if let Some(v) = duration_option(d, "partitions_update_interval", NoLimit::Forever, false)? {
        o.partitions_update_interval = v;
    }
    if let Some(v) = get::<String>(d, "batching_type")? {
        o.key_based_batching = match v.to_ascii_lowercase().as_str() {
            "default" => false,
            "key_based" => true,
            _ => {
                return Err(invalid(format!(
                    "unknown batching_type {v:?}; use \"default\" or \"key_based\""
                )))
            }
        };
    }
    o.validate().map_err(super::errors::to_pyerr)?;
    Ok(o)
}

/// Consumer options from the keyword arguments of `subscribe`.
pub fn consumer_options(d: &Bound<'_, PyDict>) -> PyResult<ConsumerOptions> {
    check_keys(
        d,
        &[
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
            "chunk_expiry",
            "max_pending_chunked_messages",
        ],
    )?;
    let mut o = ConsumerOptions::default();
    if let Some(v) = get::<String>(d, "subscription_type")? {
        o.sub_type = match v.to_ascii_lowercase().replace('_', "").as_str() {
            "exclusive" => SubType::Exclusive,
            "shared" => SubType::Shared,
            "failover" => SubType::Failover,
            "keyshared" => SubType::KeyShared,
            _ => return Err(invalid(format!("unknown subscription_type {v:?}"))),
        };
    }
    if let Some(v) = get::<String>(d, "initial_position")? {
        o.initial_position = match v.to_ascii_lowercase().as_str() {
            "latest" => InitialPosition::Latest,
            "earliest" => InitialPosition::Earliest,
            _ => {
                return Err(invalid(format!(
                    "initial_position must be \"earliest\" or \"latest\", not {v:?}"
                )))
            }
        };
    }
    if let Some(v) = get::<String>(d, "consumer_name")? {
        o.name = Some(v);
    }
    if let Some(v) = positive(get::<i64>(d, "receiver_queue_size")?, "receiver_queue_size")? {
        o.receiver_queue_size = v;
    }
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
    if let Some(v) = get::<bool>(d, "durable")? {
        o.durable = v;
    }
    if let Some(v) = d.get_item("start_message_id")? {
        if !v.is_none() {
            let id = v
                .cast::<super::types::PyMessageId>()
                .map_err(|_| invalid("start_message_id must be a MessageId"))?;
            o.start_message_id = Some(id.get().inner.clone());
        }
    }
    if let Some(v) = get::<bool>(d, "start_inclusive")? {
        o.start_inclusive = v;
    }
    if let Some(v) = get::<bool>(d, "read_compacted")? {
        o.read_compacted = v;
    }
    if let Some(v) = pairs(d, "subscription_properties")? {
        o.subscription_properties = v;
    }
    if let Some(v) = pairs(d, "properties")? {
        o.properties = v;
    }
    if let Some(v) = get::<bool>(d, "batch_index_ack")? {
        o.batch_index_ack = v;
    }
    if let Some(v) = get::<bool>(d, "replicate_subscription_state")? {
        o.replicate_subscription_state = v;
    }
    if let Some(v) = get::<i32>(d, "priority_level")? {
        o.priority_level = v;
    }
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
    if let Some(v) = duration_option(d, "chunk_expiry", NoLimit::Forever, false)? {
        o.chunk_expiry = v;
    }
    if let Some(v) = get::<i64>(d, "max_pending_chunked_messages")? {
        if v < 1 {
            return Err(invalid("max_pending_chunked_messages must be at least 1"));
        }
        o.max_pending_chunked_messages = v as usize;
    }
    o.validate().map_err(super::errors::to_pyerr)?;
    Ok(o)
}
