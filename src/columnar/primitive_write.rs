//! A write's `value` column encoded as Pulsar's primitive schemas encode a value (the Java
//! client's `StringSchema`, `LongSchema`, ... and every other client's): STRING as UTF-8, the
//! integers and FLOAT/DOUBLE big-endian (IEEE-754 for the floats), BOOLEAN as one byte 0 or 1,
//! and DATE, TIME and TIMESTAMP as eight big-endian bytes of milliseconds (since the epoch; a
//! DATE is its midnight UTC, a TIME its milliseconds since midnight).
//!
//! The column's Arrow type is the one a read gives for the kind ([`super::schema_read`]), so
//! a read's rows write back unchanged; the only latitude is in layout (any string layout, any
//! timestamp unit or time zone, `date32` or `date64`, `time32`/`time64` of any unit). A null
//! is a message without a payload (`null_value`), which a read gives back as a null.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Date64Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type, Time32MillisecondType,
    Time32SecondType, Time64MicrosecondType, Time64NanosecondType, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType, TimestampSecondType,
};
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType};
use arrow_schema::{DataType, TimeUnit};
use bytes::BytesMut;

use crate::client::{Error, OutgoingMessage, Result};
use crate::protocol::pb::schema::Type as Kind;

const MS_PER_DAY: i64 = 86_400_000;

/// Whether a write encodes `kind`'s payloads here (the others with a `value` take it as bytes).
pub fn is_primitive(kind: Kind) -> bool {
    expected(kind).is_some()
}

/// One message per row of `col`, its payload `kind`'s encoding of the row's value.
pub fn messages(kind: Kind, col: &ArrayRef) -> Result<Vec<OutgoingMessage>> {
    let t = col.data_type();
    Ok(match (kind, t) {
        (Kind::String, DataType::Utf8) => {
            let a = col.as_string::<i32>();
            each(col, a.values().len(), |i, b| b.extend_from_slice(a.value(i).as_bytes()))
        }
        (Kind::String, DataType::LargeUtf8) => {
            let a = col.as_string::<i64>();
            each(col, a.values().len(), |i, b| b.extend_from_slice(a.value(i).as_bytes()))
        }
        (Kind::String, DataType::Utf8View) => {
            let a = col.as_string_view();
            each(col, 16 * a.len(), |i, b| b.extend_from_slice(a.value(i).as_bytes()))
        }
        (Kind::Bool, DataType::Boolean) => {
            let a = col.as_boolean();
            each(col, 1, |i, b| b.extend_from_slice(&[u8::from(a.value(i))]))
        }
        (Kind::Int8, DataType::Int8) => be::<Int8Type, 1>(col, i8::to_be_bytes),
        (Kind::Int16, DataType::Int16) => be::<Int16Type, 2>(col, i16::to_be_bytes),
        (Kind::Int32, DataType::Int32) => be::<Int32Type, 4>(col, i32::to_be_bytes),
        (Kind::Int64, DataType::Int64) => be::<Int64Type, 8>(col, i64::to_be_bytes),
        (Kind::Float, DataType::Float32) => be::<Float32Type, 4>(col, f32::to_be_bytes),
        (Kind::Double, DataType::Float64) => be::<Float64Type, 8>(col, f64::to_be_bytes),
        (Kind::Date, DataType::Date32) => be::<Date32Type, 8>(col, |d| (i64::from(d) * MS_PER_DAY).to_be_bytes()),
        (Kind::Date, DataType::Date64) => be::<Date64Type, 8>(col, i64::to_be_bytes),
        (Kind::Timestamp, DataType::Timestamp(unit, _)) => match unit {
            TimeUnit::Second => be::<TimestampSecondType, 8>(col, |v| v.saturating_mul(1000).to_be_bytes()),
            TimeUnit::Millisecond => be::<TimestampMillisecondType, 8>(col, i64::to_be_bytes),
            TimeUnit::Microsecond => be::<TimestampMicrosecondType, 8>(col, |v| v.div_euclid(1000).to_be_bytes()),
            TimeUnit::Nanosecond => be::<TimestampNanosecondType, 8>(col, |v| v.div_euclid(1_000_000).to_be_bytes()),
        },
        (Kind::Time, DataType::Time32(TimeUnit::Second)) => {
            be::<Time32SecondType, 8>(col, |v| (i64::from(v) * 1000).to_be_bytes())
        }
        (Kind::Time, DataType::Time32(TimeUnit::Millisecond)) => {
            be::<Time32MillisecondType, 8>(col, |v| i64::from(v).to_be_bytes())
        }
        (Kind::Time, DataType::Time64(TimeUnit::Microsecond)) => {
            be::<Time64MicrosecondType, 8>(col, |v| v.div_euclid(1000).to_be_bytes())
        }
        (Kind::Time, DataType::Time64(TimeUnit::Nanosecond)) => {
            be::<Time64NanosecondType, 8>(col, |v| v.div_euclid(1_000_000).to_be_bytes())
        }
        _ => {
            let (name, want) = expected(kind).unwrap_or(("BYTES", "binary"));
            return Err(Error::invalid(format!(
                "column \"value\" must be {want} for the topic's {name} schema, not {t}"
            )));
        }
    })
}

/// Pulsar's name of a primitive `kind`, and the Arrow type a read gives for it (what the
/// `value` column must be), in words; None for the other kinds.
fn expected(kind: Kind) -> Option<(&'static str, &'static str)> {
    Some(match kind {
        Kind::String => ("STRING", "a string"),
        Kind::Bool => ("BOOLEAN", "a boolean"),
        Kind::Int8 => ("INT8", "int8"),
        Kind::Int16 => ("INT16", "int16"),
        Kind::Int32 => ("INT32", "int32"),
        Kind::Int64 => ("INT64", "int64"),
        Kind::Float => ("FLOAT", "float32"),
        Kind::Double => ("DOUBLE", "float64"),
        Kind::Date => ("DATE", "a date"),
        Kind::Time => ("TIME", "a time"),
        Kind::Timestamp => ("TIMESTAMP", "a timestamp"),
        _ => return None,
    })
}

/// The fixed-size big-endian encoding `f` of each value of a primitive column.
fn be<T: ArrowPrimitiveType, const W: usize>(col: &ArrayRef, f: impl Fn(T::Native) -> [u8; W]) -> Vec<OutgoingMessage> {
    let a = col.as_primitive::<T>();
    each(col, W * a.len(), |i, b| b.extend_from_slice(&f(a.value(i))))
}

/// The messages of `col`'s rows: `put` appends a non-null row's payload to one buffer
/// (about `capacity` bytes in all) that every payload is a slice of; a null row is a null value.
fn each(col: &ArrayRef, capacity: usize, mut put: impl FnMut(usize, &mut BytesMut)) -> Vec<OutgoingMessage> {
    let n = col.len();
    let mut buf = BytesMut::with_capacity(capacity);
    let mut ends = Vec::with_capacity(n);
    for i in 0..n {
        if !col.is_null(i) {
            put(i, &mut buf);
        }
        ends.push(buf.len());
    }
    let all = buf.freeze();
    let mut start = 0;
    ends.into_iter()
        .enumerate()
        .map(|(i, end)| {
            let mut m = OutgoingMessage::new(all.slice(start..end));
            m.null_value = col.is_null(i);
            start = end;
            m
        })
        .collect()
}

#[cfg(test)]
#[path = "primitive_write_tests.rs"]
mod tests;
