//! Payloads decoded with the topic's schema straight into Arrow columns, for reads whose rows
//! carry the schema's fields rather than the payload bytes (the pulsar-spark connector's
//! rows): an Avro or JSON record gives one column per field, any other Avro or JSON type and
//! the primitive schemas (STRING, INT64, ...) one `value` column of that type.
//!
//! Types, as Spark's Avro support and the connector map them: int -> int32, long -> int64,
//! float/double, boolean, string and enum -> string, bytes and fixed -> binary,
//! timestamp-millis/micros -> timestamp[us, UTC], date -> date32, decimal -> decimal128,
//! record -> struct, array -> list, map -> map<string, _>, `[null, T]` -> nullable T,
//! `[int, long]` -> int64, `[float, double]` -> float64, any other union -> a struct of
//! `member0`, `member1`, ... (one per non-null branch, the one written set). Every top-level
//! column is nullable, so a message without a payload is a row of nulls.
//!
//! Avro binary is read with the writer's schema (the message's schema version) and resolved
//! to the reader's by field name: fields the reader lacks are skipped, fields the writer lacks
//! take their default (or null), and ints, longs and floats widen as Avro allows. JSON is read
//! by field name with the reader's schema whatever the version.
//!
//! The columns are built with the Arrow types the caller asks for (what Spark turned the
//! schema into), walking the Avro type beside them; a type that does not fit is refused when
//! the layout is made.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arrow_array::builder::TimestampMicrosecondBuilder;
use arrow_array::{ArrayRef, StructArray};
use arrow_schema::{ArrowError, DataType, Field, Fields, TimeUnit};
use serde_json::Value;

use super::schema_cols::{map_type, micros, widened, Col, Input, Text};
#[cfg(test)]
use super::schema_cols::{parse_decimal, unscaled};

use crate::client::{Error, ErrorKind, Message, Result};
use crate::protocol::avro::{AvroSchema, Node};
use crate::protocol::pb::schema::Type as Kind;

const UTC: &str = "UTC";
const MILLIS_PER_DAY: i64 = 86_400_000;

/// How the payloads are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Avro,
    Json,
    /// One of the fixed-size or string schemas, by its wire type.
    Primitive(Kind),
}

/// The schema of a topic's payloads as Arrow columns, and the writer schemas met so far.
#[derive(Debug)]
pub struct ValueSchema {
    format: Format,
    /// The reader's (latest) definition, for Avro and JSON.
    reader: Arc<AvroSchema>,
    version: Vec<u8>,
    /// The columns: the root record's fields, or one `value`.
    fields: Fields,
    record: bool,
    /// Writer definitions by version; None: the registry has no such version.
    writers: Mutex<HashMap<Vec<u8>, Option<Arc<AvroSchema>>>>,
}

impl ValueSchema {
    /// The columns of payloads of a schema of wire type `kind` with `definition`, registered
    /// under `version`; None when payloads stay bytes (no schema, BYTES, and the kinds not
    /// decoded here: PROTOBUF, PROTOBUF_NATIVE, KEY_VALUE, TIME and the java.time ones).
    pub fn new(kind: i32, definition: &[u8], version: &[u8]) -> std::result::Result<Option<ValueSchema>, String> {
        let kind = Kind::try_from(kind).map_err(|_| format!("unknown schema type {kind}"))?;
        let (format, reader) = match kind {
            Kind::Avro | Kind::Json => {
                let text = std::str::from_utf8(definition).map_err(|_| "the definition is not UTF-8")?;
                let s = AvroSchema::parse(text)?;
                (if kind == Kind::Avro { Format::Avro } else { Format::Json }, s)
            }
            Kind::String
            | Kind::Bool
            | Kind::Int8
            | Kind::Int16
            | Kind::Int32
            | Kind::Int64
            | Kind::Float
            | Kind::Double
            | Kind::Date
            | Kind::Timestamp => (Format::Primitive(kind), AvroSchema::parse("\"null\"")?),
            _ => return Ok(None),
        };
        let (fields, record) = match (&format, &reader.root) {
            (Format::Primitive(k), _) => (Fields::from(vec![Field::new("value", primitive_type(*k), true)]), false),
            (_, Node::Record(i)) => {
                let mut seen = vec![*i];
                let fields = reader.records[*i]
                    .fields
                    .iter()
                    .map(|f| Ok(Field::new(&f.name, arrow_type(&reader, &f.node, &mut seen)?.0, true)))
                    .collect::<std::result::Result<Vec<_>, String>>()?;
                (Fields::from(fields), true)
            }
            (_, node) => {
                let t = arrow_type(&reader, node, &mut Vec::new())?.0;
                (Fields::from(vec![Field::new("value", t, true)]), false)
            }
        };
        Ok(Some(ValueSchema {
            format,
            reader: Arc::new(reader),
            version: version.to_vec(),
            fields,
            record,
            writers: Mutex::new(HashMap::new()),
        }))
    }

    /// The columns, in the schema's order (every one nullable).
    pub fn fields(&self) -> &Fields {
        &self.fields
    }

    /// Checks that `t` (the type a caller asks column `i` in) fits the schema's type there.
    pub fn check_type(&self, i: usize, t: &DataType) -> std::result::Result<(), String> {
        let mut probe = Vec::new();
        self.column_builders(Some((i, t)), &mut probe)
    }

    /// The versions of `msgs` whose writer schema is needed and not known yet (Avro only:
    /// JSON is read by field name, the primitives have one encoding).
    pub fn unknown_versions(&self, msgs: &[&Message]) -> Vec<Vec<u8>> {
        if self.format != Format::Avro {
            return Vec::new();
        }
        let writers = self.writers.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<Vec<u8>> = Vec::new();
        for m in msgs {
            if let Some(v) = version_of(m) {
                if v != self.version.as_slice() && !writers.contains_key(v) && !out.iter().any(|o| o == v) {
                    out.push(v.to_vec());
                }
            }
        }
        out
    }

    /// Records the writer schema of `version` (None: the registry has none); one that is not
    /// Avro, or does not compile, leaves the version undecodable.
    pub fn add_writer(&self, version: Vec<u8>, writer: Option<(i32, &[u8])>) {
        let compiled = writer
            .filter(|(kind, _)| *kind == Kind::Avro as i32)
            .and_then(|(_, d)| std::str::from_utf8(d).ok().and_then(|t| AvroSchema::parse(t).ok()))
            .map(Arc::new);
        self.writers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(version, compiled);
    }

    /// One builder per column, with the type `types` gives it (by column index) or the
    /// schema's own; `only` checks just one column's type.
    fn column_builders(&self, only: Option<(usize, &DataType)>, out: &mut Vec<Col>) -> std::result::Result<(), String> {
        let node = match (&self.format, &self.reader.root) {
            (Format::Primitive(_), _) => return Ok(()),
            (_, Node::Record(i)) if self.record => {
                let rec = &self.reader.records[*i];
                for (j, f) in rec.fields.iter().enumerate() {
                    match only {
                        Some((k, t)) if k == j => {
                            out.push(Col::new(&self.reader, &f.node, t).map_err(|e| format!("{}: {e}", f.name))?)
                        }
                        Some(_) => {}
                        None => out.push(Col::new(&self.reader, &f.node, self.fields[j].data_type())?),
                    }
                }
                return Ok(());
            }
            (_, node) => node,
        };
        let t = only.map_or(self.fields[0].data_type(), |(_, t)| t);
        out.push(Col::new(&self.reader, node, t)?);
        Ok(())
    }

    /// The columns of `msgs` (one array per column, in order), with the types `types` gives
    /// (by column index; the schema's own for the others). `topic` names the messages' topic
    /// in errors.
    pub fn decode(&self, msgs: &[&Message], types: &HashMap<usize, DataType>, topic: &str) -> Result<Vec<ArrayRef>> {
        if let Format::Primitive(k) = self.format {
            let t = types.get(&0).unwrap_or(self.fields[0].data_type());
            return primitive_column(k, t, msgs, topic).map(|a| vec![a]);
        }
        let mut cols = Vec::new();
        let typed = |i: usize| types.get(&i).unwrap_or(self.fields[i].data_type()).clone();
        let fields: Vec<Field> = (0..self.fields.len())
            .map(|i| Field::new(self.fields[i].name(), typed(i), true))
            .collect();
        let root_type = if self.record {
            DataType::Struct(Fields::from(fields.clone()))
        } else {
            fields[0].data_type().clone()
        };
        let mut root = Col::new(&self.reader, &self.reader.root, &root_type).map_err(Error::invalid)?;
        for m in msgs {
            if m.null_value() {
                root.null();
                continue;
            }
            let done = match self.format {
                Format::Json => serde_json::from_slice::<Value>(&m.payload)
                    .map_err(|e| format!("not JSON: {e}"))
                    .and_then(|v| root.json(&v, Text::Payload).map(|_| ())),
                _ => {
                    let w = self.writer_of(m).map_err(|e| undecodable(m, topic, &e))?;
                    let mut r = Input::new(&m.payload);
                    root.avro(&w, &w.root, &mut r)
                        .and_then(|_| match m.payload.len() - r.pos {
                            0 => Ok(()),
                            n => Err(format!("{n} bytes left over after the Avro datum")),
                        })
                }
            };
            done.map_err(|e| undecodable(m, topic, &e))?;
        }
        let array = root.finish().map_err(arrow_error)?;
        if !self.record {
            cols.push(array);
            return Ok(cols);
        }
        let s = array
            .as_any()
            .downcast_ref::<StructArray>()
            .ok_or_else(|| Error::new(ErrorKind::Other, "a record did not build a struct"))?;
        Ok(s.columns().to_vec())
    }

    fn writer_of(&self, m: &Message) -> std::result::Result<Arc<AvroSchema>, String> {
        match version_of(m) {
            None => Ok(self.reader.clone()),
            Some(v) if v == self.version.as_slice() => Ok(self.reader.clone()),
            Some(v) => match self.writers.lock().unwrap_or_else(|e| e.into_inner()).get(v) {
                Some(Some(w)) => Ok(w.clone()),
                Some(None) => Err(format!(
                    "its schema version {} is not an Avro schema in the registry",
                    version_number(v)
                )),
                None => Err(format!("its schema version {} was not fetched", version_number(v))),
            },
        }
    }
}

fn version_of(m: &Message) -> Option<&[u8]> {
    m.metadata.schema_version.as_deref().filter(|v| !v.is_empty())
}

/// The registry's version bytes as the number the admin API shows.
pub fn version_number(v: &[u8]) -> String {
    match <[u8; 8]>::try_from(v) {
        Ok(b) => i64::from_be_bytes(b).to_string(),
        Err(_) => format!("{v:02x?}"),
    }
}

fn undecodable(m: &Message, topic: &str, why: &str) -> Error {
    let version = version_of(m).map_or_else(|| "none".to_string(), version_number);
    Error::new(
        ErrorKind::SchemaDecode,
        format!(
            "the payload of message {} of {topic} (schema version {version}) does not decode with the topic's \
             schema: {why}",
            m.id
        ),
    )
}

fn arrow_error(e: ArrowError) -> Error {
    Error::new(ErrorKind::Other, format!("building Arrow columns: {e}"))
}

fn primitive_type(k: Kind) -> DataType {
    match k {
        Kind::String => DataType::Utf8,
        Kind::Bool => DataType::Boolean,
        Kind::Int8 => DataType::Int8,
        Kind::Int16 => DataType::Int16,
        Kind::Int32 => DataType::Int32,
        Kind::Int64 => DataType::Int64,
        Kind::Float => DataType::Float32,
        Kind::Double => DataType::Float64,
        Kind::Date => DataType::Date32,
        _ => DataType::Timestamp(TimeUnit::Microsecond, Some(UTC.into())),
    }
}

/// The Arrow type of an Avro type, and whether it holds nulls.
pub fn arrow_type(s: &AvroSchema, node: &Node, seen: &mut Vec<usize>) -> std::result::Result<(DataType, bool), String> {
    Ok(match node {
        Node::Null => return Err("the type null alone has no column type".into()),
        Node::Boolean => (DataType::Boolean, false),
        Node::Int => (DataType::Int32, false),
        Node::Long => (DataType::Int64, false),
        Node::Float => (DataType::Float32, false),
        Node::Double => (DataType::Float64, false),
        Node::Bytes | Node::Fixed(_) => (DataType::Binary, false),
        Node::String | Node::Enum(_) => (DataType::Utf8, false),
        Node::TimestampMillis | Node::TimestampMicros => {
            (DataType::Timestamp(TimeUnit::Microsecond, Some(UTC.into())), false)
        }
        Node::Date => (DataType::Date32, false),
        Node::Decimal { precision, scale, .. } => {
            if *precision > 38 {
                return Err(format!("decimal({precision}, {scale}) is wider than Spark's 38 digits"));
            }
            (DataType::Decimal128(*precision as u8, *scale as i8), false)
        }
        Node::Record(i) => {
            if seen.contains(i) {
                return Err(format!(
                    "record {} refers to itself, which a Spark column cannot hold",
                    s.records[*i].name
                ));
            }
            seen.push(*i);
            let fields = s.records[*i]
                .fields
                .iter()
                .map(|f| {
                    let (t, nullable) = arrow_type(s, &f.node, seen)?;
                    Ok(Field::new(&f.name, t, nullable))
                })
                .collect::<std::result::Result<Vec<_>, String>>();
            seen.pop();
            (DataType::Struct(Fields::from(fields?)), false)
        }
        Node::Array(item) => {
            let (t, nullable) = arrow_type(s, item, seen)?;
            (DataType::List(Arc::new(Field::new("element", t, nullable))), false)
        }
        Node::Map(values) => {
            let (t, nullable) = arrow_type(s, values, seen)?;
            (map_type(t, nullable), false)
        }
        Node::Union(branches) => {
            let others: Vec<&Node> = branches.iter().filter(|b| **b != Node::Null).collect();
            let has_null = others.len() < branches.len();
            match others.as_slice() {
                [] => return Err("a union of null alone has no column type".into()),
                [one] => {
                    let (t, nullable) = arrow_type(s, one, seen)?;
                    (t, nullable || has_null)
                }
                _ => match widened(&others) {
                    Some(t) => (t, has_null),
                    None => {
                        let fields = others
                            .iter()
                            .enumerate()
                            .map(|(i, b)| Ok(Field::new(format!("member{i}"), arrow_type(s, b, seen)?.0, true)))
                            .collect::<std::result::Result<Vec<_>, String>>()?;
                        (DataType::Struct(Fields::from(fields)), has_null)
                    }
                },
            }
        }
    })
}

/// The column of a primitive schema's payloads (big-endian, as every Pulsar client writes them).
fn primitive_column(k: Kind, t: &DataType, msgs: &[&Message], topic: &str) -> Result<ArrayRef> {
    let mut col = Col::of_type(t)
        .or_else(|| {
            matches!(t, DataType::Timestamp(TimeUnit::Microsecond, _)).then(|| {
                Col::Ts(
                    TimestampMicrosecondBuilder::new().with_timezone_opt(match t {
                        DataType::Timestamp(_, tz) => tz.clone(),
                        _ => None,
                    }),
                    1000,
                )
            })
        })
        .filter(|_| {
            *t == primitive_type(k)
                || matches!((k, t), (Kind::Timestamp, DataType::Timestamp(TimeUnit::Microsecond, _)))
        })
        .ok_or_else(|| Error::invalid(format!("column \"value\" must be {}, not {t}", primitive_type(k))))?;
    for m in msgs {
        if m.null_value() {
            col.null();
            continue;
        }
        let p = &m.payload[..];
        let fixed = |n: usize| -> std::result::Result<&[u8], String> {
            (p.len() == n)
                .then_some(p)
                .ok_or_else(|| format!("{} bytes where {n} are expected", p.len()))
        };
        let done: std::result::Result<(), String> = (|| {
            match &mut col {
                Col::Str(b) => b.append_value(std::str::from_utf8(p).map_err(|e| format!("not UTF-8: {e}"))?),
                Col::Bool(b) => b.append_value(fixed(1)?[0] != 0),
                Col::I8(b) => b.append_value(fixed(1)?[0] as i8),
                Col::I16(b) => b.append_value(i16::from_be_bytes(fixed(2)?.try_into().map_err(|_| "size")?)),
                Col::I32(b) => b.append_value(i32::from_be_bytes(fixed(4)?.try_into().map_err(|_| "size")?)),
                Col::I64(b) => b.append_value(i64::from_be_bytes(fixed(8)?.try_into().map_err(|_| "size")?)),
                Col::F32(b) => b.append_value(f32::from_be_bytes(fixed(4)?.try_into().map_err(|_| "size")?)),
                Col::F64(b) => b.append_value(f64::from_be_bytes(fixed(8)?.try_into().map_err(|_| "size")?)),
                Col::Ts(b, _) => {
                    let ms = i64::from_be_bytes(fixed(8)?.try_into().map_err(|_| "size")?);
                    b.append_value(micros(ms, 1000)?);
                }
                Col::Date(b) => {
                    // java.util.Date: milliseconds of the day's midnight UTC
                    let ms = i64::from_be_bytes(fixed(8)?.try_into().map_err(|_| "size")?);
                    let days = ms.div_euclid(MILLIS_PER_DAY);
                    b.append_value(i32::try_from(days).map_err(|_| "a date out of range")?);
                }
                _ => return Err("not a primitive column".into()),
            }
            Ok(())
        })();
        done.map_err(|e| undecodable(m, topic, &e))?;
    }
    col.finish().map_err(arrow_error)
}

#[cfg(test)]
#[path = "schema_read_tests.rs"]
mod tests;
