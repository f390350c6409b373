//! Python values to engine values: payloads, message fields, durations. Options are read in
//! [`super::options`].

use std::time::{Duration, Instant};

use bytes::Bytes;
use pyo3::buffer::PyBuffer;
use pyo3::conversion::FromPyObjectOwned;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDateTime, PyDelta, PyDict, PyFloat, PyInt, PyMapping, PyString};

use super::errors::invalid;
use crate::client::OutgoingMessage;

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

/// The `(key, value)` pairs of a mapping of str to str (a dict or any `Mapping`); `what` names
/// the argument in the error.
pub fn string_pairs(value: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<(String, String)>> {
    let wrong = || invalid(format!("{what} must map str to str, not {}", value.get_type()));
    let items = match value.cast::<PyDict>() {
        Ok(d) => d.items(),
        Err(_) => value.cast::<PyMapping>().map_err(|_| wrong())?.items()?,
    };
    let mut pairs = Vec::with_capacity(items.len());
    for item in items.iter() {
        let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
        let (Ok(k), Ok(v)) = (k.extract::<String>(), v.extract::<String>()) else {
            return Err(wrong());
        };
        pairs.push((k, v));
    }
    Ok(pairs)
}

/// Milliseconds since the epoch from a `datetime` or a number of milliseconds.
pub fn epoch_ms(value: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    let ms = if value.is_instance_of::<PyDateTime>() {
        value.call_method0("timestamp")?.extract::<f64>()? * 1000.0
    } else if value.is_instance_of::<PyBool>() {
        f64::NAN
    } else {
        value.extract::<f64>().unwrap_or(f64::NAN)
    };
    if !(0.0..=u64::MAX as f64).contains(&ms) {
        return Err(invalid(format!(
            "{what} must be a datetime or milliseconds since the epoch, not {}",
            value.repr()?
        )));
    }
    Ok(ms as u64)
}

/// A message from `data` and the keyword arguments of `Producer.send` (a dict, or None when
/// none were given): `key`, `properties`, `event_time`, `deliver_at`, `deliver_after`,
/// `ordering_key`, `sequence_id`, `replication_clusters`, `disable_replication`. A `None` value
/// is the same as leaving the argument out.
pub fn message(data: &Bound<'_, PyAny>, fields: Option<&Bound<'_, PyDict>>) -> PyResult<OutgoingMessage> {
    let mut msg = OutgoingMessage::new(payload(data)?);
    let Some(fields) = fields else {
        return Ok(msg);
    };
    let mut deliver_after = None;
    for (name, value) in fields.iter() {
        if value.is_none() {
            continue;
        }
        match name.cast::<PyString>()?.to_str()? {
            "key" => msg.key = Some(value.extract().map_err(|_| invalid("key must be a str"))?),
            "properties" => msg.properties = string_pairs(&value, "properties")?,
            "event_time" => msg.event_time = Some(epoch_ms(&value, "event_time")?),
            "deliver_at" => msg.deliver_at = Some(epoch_ms(&value, "deliver_at")? as i64),
            "deliver_after" => deliver_after = Some(value),
            "ordering_key" => msg.ordering_key = Some(payload(&value)?.to_vec()),
            "sequence_id" => match value.extract::<u64>() {
                Ok(seq) if !value.is_instance_of::<PyBool>() => msg.sequence_id = Some(seq),
                _ => return Err(invalid("sequence_id must be a non-negative int")),
            },
            "replication_clusters" => {
                let clusters: Vec<String> = value
                    .extract()
                    .map_err(|_| invalid("replication_clusters must be a list of cluster names (str)"))?;
                if !msg.replication_clusters.is_empty() {
                    return Err(invalid("give replication_clusters or disable_replication, not both"));
                }
                msg.replication_clusters = clusters;
            }
            "disable_replication" => {
                let off: bool = value
                    .extract()
                    .map_err(|_| invalid("disable_replication must be a bool"))?;
                if off {
                    if !msg.replication_clusters.is_empty() {
                        return Err(invalid("give replication_clusters or disable_replication, not both"));
                    }
                    // The broker's name for "this cluster only" (the Java and C++ clients send it).
                    msg.replication_clusters = vec!["__local__".to_string()];
                }
            }
            // The transaction handle lives above this module: the producer reads it
            // (`transaction::of_fields`).
            "txn" => {}
            other => {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "unexpected keyword argument '{other}' for a message (it takes key, properties, \
                     event_time, deliver_after, deliver_at, ordering_key, sequence_id, \
                     replication_clusters, disable_replication, txn)"
                )))
            }
        }
    }
    if let Some(after) = deliver_after {
        if msg.deliver_at.is_some() {
            return Err(invalid("give deliver_at or deliver_after, not both"));
        }
        let Span::Within(delay) = span(Some(&after), "deliver_after")? else {
            return Err(invalid(
                "deliver_after must be a finite number of seconds up to 2**31: the message would never be delivered",
            ));
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        msg.deliver_at = Some((now + delay).as_millis() as i64);
    }
    Ok(msg)
}

/// The messages of a `send_many` call: payloads plus optional per-message columns (`keys`,
/// `properties`, `event_times`), each a sequence as long as the payloads whose entries may be
/// None.
pub fn messages<'py>(
    payloads: &Bound<'py, PyAny>,
    keys: Option<&Bound<'py, PyAny>>,
    properties: Option<&Bound<'py, PyAny>>,
    event_times: Option<&Bound<'py, PyAny>>,
) -> PyResult<Vec<OutgoingMessage>> {
    let mut msgs: Vec<OutgoingMessage> = self::payloads(payloads)?
        .into_iter()
        .map(OutgoingMessage::new)
        .collect();
    for (name, values) in [("keys", keys), ("properties", properties), ("event_times", event_times)] {
        let Some(values) = values.filter(|v| !v.is_none()) else {
            continue;
        };
        let values: Vec<Bound<'py, PyAny>> = values
            .try_iter()
            .and_then(|it| it.collect())
            .map_err(|_| invalid(format!("{name} must be a sequence with one entry per payload")))?;
        if values.len() != msgs.len() {
            return Err(invalid(format!("{} {name} for {} payloads", values.len(), msgs.len())));
        }
        for (m, v) in msgs.iter_mut().zip(values) {
            if v.is_none() {
                continue;
            }
            match name {
                "keys" => m.key = Some(v.extract().map_err(|_| invalid("keys must be str or None"))?),
                "properties" => m.properties = string_pairs(&v, "properties")?,
                _ => m.event_time = Some(epoch_ms(&v, "event_times")?),
            }
        }
    }
    Ok(msgs)
}

pub(super) fn get<'py, T: for<'a> FromPyObjectOwned<'py>>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<Option<T>> {
    match d.get_item(key)? {
        None => Ok(None),
        Some(v) if v.is_none() => Ok(None),
        Some(v) => v
            .extract::<T>()
            .map(Some)
            .map_err(|_| invalid(format!("invalid value for {key}: {v}"))),
    }
}

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
pub(super) enum NoLimit {
    /// Wait as long as it takes: [`NO_LIMIT`].
    Forever,
    /// The feature is off; the engine reads a zero duration as off (`send_timeout`, `ack_timeout`).
    Off,
    /// A delay that never ends would silently stop the feature: refused, saying why.
    Refused(&'static str),
}

/// A duration option: `None` if the key is absent (the engine's default applies).
pub(super) fn duration_option(
    d: &Bound<'_, PyDict>,
    key: &str,
    no_limit: NoLimit,
    zero_ok: bool,
) -> PyResult<Option<Duration>> {
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
