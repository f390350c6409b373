//! The rows of an Arrow record batch as messages to publish: payloads are sliced out of one
//! copy of the value column, and no per-row object exists but the message itself.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Int16Type, Int32Type, Int64Type, Int8Type, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef, MapArray, RecordBatch};
use arrow_schema::{DataType, TimeUnit};
use bytes::BytesMut;

use crate::client::{Error, OutgoingMessage, Result};

/// The columns that carry each part of a message (None, or a name the batch lacks: not set).
#[derive(Debug, Clone, Copy)]
pub struct Roles<'a> {
    /// The payload: binary or string, never null. Required.
    pub value: &'a str,
    /// The key: string, or binary holding UTF-8.
    pub key: Option<&'a str>,
    /// The properties: a map of string to string (a null value is an empty string).
    pub properties: Option<&'a str>,
    /// The event time: a timestamp (one without a time zone is UTC) or an integer of
    /// milliseconds since the epoch.
    pub event_time: Option<&'a str>,
}

/// Variable-length binary or string values, whatever their offset width or layout.
enum ByteValues<'a> {
    Binary(&'a arrow_array::BinaryArray),
    LargeBinary(&'a arrow_array::LargeBinaryArray),
    String(&'a arrow_array::StringArray),
    LargeString(&'a arrow_array::LargeStringArray),
    FixedSize(&'a arrow_array::FixedSizeBinaryArray),
    BinaryView(&'a arrow_array::BinaryViewArray),
    StringView(&'a arrow_array::StringViewArray),
}

impl<'a> ByteValues<'a> {
    fn of(a: &'a ArrayRef, strings_only: bool) -> Option<Self> {
        Some(match a.data_type() {
            DataType::Utf8 => ByteValues::String(a.as_string::<i32>()),
            DataType::LargeUtf8 => ByteValues::LargeString(a.as_string::<i64>()),
            DataType::Utf8View => ByteValues::StringView(a.as_string_view()),
            _ if strings_only => return None,
            DataType::Binary => ByteValues::Binary(a.as_binary::<i32>()),
            DataType::LargeBinary => ByteValues::LargeBinary(a.as_binary::<i64>()),
            DataType::FixedSizeBinary(_) => ByteValues::FixedSize(a.as_fixed_size_binary()),
            DataType::BinaryView => ByteValues::BinaryView(a.as_binary_view()),
            _ => return None,
        })
    }

    fn is_text(&self) -> bool {
        matches!(
            self,
            ByteValues::String(_) | ByteValues::LargeString(_) | ByteValues::StringView(_)
        )
    }

    /// Row `i` (not null).
    fn value(&self, i: usize) -> &'a [u8] {
        match self {
            ByteValues::Binary(a) => a.value(i),
            ByteValues::LargeBinary(a) => a.value(i),
            ByteValues::String(a) => a.value(i).as_bytes(),
            ByteValues::LargeString(a) => a.value(i).as_bytes(),
            ByteValues::FixedSize(a) => a.value(i),
            ByteValues::BinaryView(a) => a.value(i),
            ByteValues::StringView(a) => a.value(i).as_bytes(),
        }
    }
}

fn column<'b>(batch: &'b RecordBatch, name: Option<&str>) -> Option<&'b ArrayRef> {
    name.and_then(|n| batch.column_by_name(n))
}

/// The messages of every row of `batch`, in order.
pub fn messages(batch: &RecordBatch, roles: &Roles<'_>) -> Result<Vec<OutgoingMessage>> {
    let n = batch.num_rows();
    let names: Vec<&str> = batch.schema_ref().fields().iter().map(|f| f.name().as_str()).collect();
    let Some(vcol) = batch.column_by_name(roles.value) else {
        return Err(Error::invalid(format!(
            "the data has no {:?} column (columns: {names:?})",
            roles.value
        )));
    };
    let Some(values) = ByteValues::of(vcol, false) else {
        return Err(Error::invalid(format!(
            "column {:?} must be binary or string, not {}",
            roles.value,
            vcol.data_type()
        )));
    };
    if vcol.null_count() > 0 {
        return Err(Error::invalid(format!(
            "column {:?} has {} null value(s); Pulsar messages need a payload",
            roles.value,
            vcol.null_count()
        )));
    }
    let total: usize = (0..n).map(|i| values.value(i).len()).sum();
    let mut all = BytesMut::with_capacity(total);
    for i in 0..n {
        all.extend_from_slice(values.value(i));
    }
    let all = all.freeze();
    let mut out = Vec::with_capacity(n);
    let mut at = 0;
    for i in 0..n {
        let len = values.value(i).len();
        out.push(OutgoingMessage::new(all.slice(at..at + len)));
        at += len;
    }
    with_metadata(batch, roles, out)
}

/// The messages of `payloads` (one per row of `batch`, in order) with the key, properties
/// and event time of their row (the `value` role is not read).
pub fn with_metadata(
    batch: &RecordBatch,
    roles: &Roles<'_>,
    mut out: Vec<OutgoingMessage>,
) -> Result<Vec<OutgoingMessage>> {
    if let Some(kcol) = column(batch, roles.key) {
        set_keys(&mut out, kcol, roles.key.unwrap_or_default())?;
    }
    if let Some(pcol) = column(batch, roles.properties) {
        set_properties(&mut out, pcol, roles.properties.unwrap_or_default())?;
    }
    if let Some(ecol) = column(batch, roles.event_time) {
        set_event_times(&mut out, ecol, roles.event_time.unwrap_or_default())?;
    }
    Ok(out)
}

fn set_keys(out: &mut [OutgoingMessage], col: &ArrayRef, name: &str) -> Result<()> {
    let Some(keys) = ByteValues::of(col, false).filter(|k| !matches!(k, ByteValues::FixedSize(_))) else {
        return Err(Error::invalid(format!(
            "column {name:?} must be string or binary, not {}",
            col.data_type()
        )));
    };
    let text = keys.is_text();
    for (i, m) in out.iter_mut().enumerate() {
        if col.is_null(i) {
            continue;
        }
        let bytes = keys.value(i);
        let key = if text {
            // string arrays hold UTF-8 by construction
            String::from_utf8_lossy(bytes).into_owned()
        } else {
            String::from_utf8(bytes.to_vec())
                .map_err(|_| Error::invalid(format!("column {name:?}: the key of row {i} is not UTF-8")))?
        };
        m.key = Some(key);
    }
    Ok(())
}

fn set_properties(out: &mut [OutgoingMessage], col: &ArrayRef, name: &str) -> Result<()> {
    let wrong = || {
        Error::invalid(format!(
            "column {name:?} must be map<string, string>, not {}",
            col.data_type()
        ))
    };
    let Some(map) = col.as_any().downcast_ref::<MapArray>() else {
        return Err(wrong());
    };
    let (Some(keys), Some(values)) = (ByteValues::of(map.keys(), true), ByteValues::of(map.values(), true)) else {
        return Err(wrong());
    };
    let value_col = map.values();
    let offsets = map.value_offsets();
    for (i, m) in out.iter_mut().enumerate() {
        if map.is_null(i) {
            continue;
        }
        let (lo, hi) = (offsets[i] as usize, offsets[i + 1] as usize);
        m.properties.reserve(hi - lo);
        for j in lo..hi {
            let k = String::from_utf8_lossy(keys.value(j)).into_owned();
            let v = if value_col.is_null(j) {
                String::new()
            } else {
                String::from_utf8_lossy(values.value(j)).into_owned()
            };
            m.properties.push((k, v));
        }
    }
    Ok(())
}

fn set_event_times(out: &mut [OutgoingMessage], col: &ArrayRef, name: &str) -> Result<()> {
    let ms: Vec<Option<i64>> = match col.data_type() {
        DataType::Timestamp(unit, _) => match unit {
            TimeUnit::Second => col
                .as_primitive::<TimestampSecondType>()
                .iter()
                .map(|v| v.map(|s| s.saturating_mul(1000)))
                .collect(),
            TimeUnit::Millisecond => col.as_primitive::<TimestampMillisecondType>().iter().collect(),
            TimeUnit::Microsecond => col
                .as_primitive::<TimestampMicrosecondType>()
                .iter()
                .map(|v| v.map(|x| x.div_euclid(1000)))
                .collect(),
            TimeUnit::Nanosecond => col
                .as_primitive::<TimestampNanosecondType>()
                .iter()
                .map(|v| v.map(|x| x.div_euclid(1_000_000)))
                .collect(),
        },
        DataType::Int64 => col.as_primitive::<Int64Type>().iter().collect(),
        DataType::Int32 => col
            .as_primitive::<Int32Type>()
            .iter()
            .map(|v| v.map(i64::from))
            .collect(),
        DataType::Int16 => col
            .as_primitive::<Int16Type>()
            .iter()
            .map(|v| v.map(i64::from))
            .collect(),
        DataType::Int8 => col
            .as_primitive::<Int8Type>()
            .iter()
            .map(|v| v.map(i64::from))
            .collect(),
        DataType::UInt32 => col
            .as_primitive::<UInt32Type>()
            .iter()
            .map(|v| v.map(i64::from))
            .collect(),
        DataType::UInt16 => col
            .as_primitive::<UInt16Type>()
            .iter()
            .map(|v| v.map(i64::from))
            .collect(),
        DataType::UInt8 => col
            .as_primitive::<UInt8Type>()
            .iter()
            .map(|v| v.map(i64::from))
            .collect(),
        DataType::UInt64 => col
            .as_primitive::<UInt64Type>()
            .iter()
            .map(|v| v.map(|x| i64::try_from(x).unwrap_or(i64::MAX)))
            .collect(),
        t => {
            return Err(Error::invalid(format!(
                "column {name:?} must be a timestamp or milliseconds (long), not {t}"
            )))
        }
    };
    fill_times(out, name, ms.into_iter())
}

fn fill_times(out: &mut [OutgoingMessage], name: &str, ms: impl Iterator<Item = Option<i64>>) -> Result<()> {
    for (i, (m, t)) in out.iter_mut().zip(ms).enumerate() {
        match t {
            None => {}
            Some(t) if t < 0 => {
                return Err(Error::invalid(format!(
                    "column {name:?}: the event time of row {i} is before 1970"
                )))
            }
            // 0 is "no event time" on the wire
            Some(t) => m.event_time = (t > 0).then_some(t as u64),
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "write_tests.rs"]
mod tests;
