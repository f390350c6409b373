//! The rows of a record batch encoded with the topic's Avro or JSON schema: the payload of row
//! `i` is the record whose fields are the columns of the same names (a non-record schema takes
//! the `value` column). The types are those a read gives ([`super::schema_read`]), and the
//! usual widenings: any integer column for int and long (in range), any number for float and
//! double, a timestamp of any unit, a string column for an enum (one of its symbols).
//!
//! A field without a column takes its default, or null in a union with null; otherwise the
//! batch is refused before anything is sent. A null where the schema has no null is an error
//! naming the row.
//!
//! The primitive schemas (STRING, INT64, ...) encode the `value` column as
//! [`super::primitive_write`] says.

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int16Type, Int32Type, Int64Type, Int8Type,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType, UInt16Type,
    UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::{DataType, TimeUnit};
use base64::Engine as _;
use bytes::Bytes;
use serde_json::{Map, Value};

use super::primitive_write;
use crate::client::{Error, OutgoingMessage, Result};
use crate::protocol::avro::{put_long, AvroSchema, Node, Record};
use crate::protocol::pb::schema::Type as Kind;

/// Encodes rows with a topic's Avro (binary), JSON or primitive schema.
#[derive(Debug)]
pub struct ValueEncoder {
    schema: AvroSchema,
    json: bool,
    /// A primitive schema's kind: the `value` column is encoded, `schema` is unused.
    primitive: Option<Kind>,
}

/// Where a row's value for one field comes from.
enum Source<'a> {
    Column(&'a ArrayRef),
    Default(&'a Value),
    Null,
}

impl ValueEncoder {
    /// An encoder for a schema of wire type `kind`; None for the kinds whose payloads a write
    /// takes as bytes (NONE, BYTES, PROTOBUF, PROTOBUF_NATIVE, KEY_VALUE, the java.time ones).
    pub fn new(kind: i32, definition: &[u8]) -> std::result::Result<Option<ValueEncoder>, String> {
        let json = match Kind::try_from(kind) {
            Ok(Kind::Avro) => false,
            Ok(Kind::Json) => true,
            Ok(k) if primitive_write::is_primitive(k) => {
                return Ok(Some(ValueEncoder {
                    schema: AvroSchema::parse("\"null\"")?,
                    json: false,
                    primitive: Some(k),
                }))
            }
            _ => return Ok(None),
        };
        let text = std::str::from_utf8(definition).map_err(|_| "the definition is not UTF-8")?;
        Ok(Some(ValueEncoder {
            schema: AvroSchema::parse(text)?,
            json,
            primitive: None,
        }))
    }

    /// The message of every row of `batch`, with its payload only (a primitive schema's null
    /// `value` is a null value).
    pub fn messages(&self, batch: &RecordBatch) -> Result<Vec<OutgoingMessage>> {
        if let Some(k) = self.primitive {
            let col = batch
                .column_by_name("value")
                .ok_or_else(|| Error::invalid("a write to a topic with a primitive schema needs a 'value' column"))?;
            return primitive_write::messages(k, col);
        }
        Ok(self.payloads(batch)?.into_iter().map(OutgoingMessage::new).collect())
    }

    /// The Avro or JSON payload of every row of `batch`.
    fn payloads(&self, batch: &RecordBatch) -> Result<Vec<Bytes>> {
        let s = &self.schema;
        let n = batch.num_rows();
        let bad = |i: usize, e: String| Error::invalid(format!("row {i} does not fit the topic's schema: {e}"));
        let mut out = Vec::with_capacity(n);
        if let Node::Record(r) = &s.root {
            let rec = &s.records[*r];
            let sources = sources(rec, |name| batch.column_by_name(name))?;
            for i in 0..n {
                let bytes = if self.json {
                    let mut o = Map::new();
                    for (f, src) in rec.fields.iter().zip(&sources) {
                        o.insert(
                            f.name.clone(),
                            self.source_json(&f.node, src, i)
                                .map_err(|e| bad(i, format!("{}: {e}", f.name)))?,
                        );
                    }
                    serde_json::to_vec(&Value::Object(o)).map_err(|e| bad(i, e.to_string()))?
                } else {
                    let mut buf = Vec::with_capacity(64);
                    for (f, src) in rec.fields.iter().zip(&sources) {
                        self.source_avro(&f.node, src, i, &mut buf)
                            .map_err(|e| bad(i, format!("{}: {e}", f.name)))?;
                    }
                    buf
                };
                out.push(Bytes::from(bytes));
            }
            return Ok(out);
        }
        let col = batch
            .column_by_name("value")
            .ok_or_else(|| Error::invalid("the topic's schema is not a record: a write needs a 'value' column"))?;
        for i in 0..n {
            let bytes = if self.json {
                serde_json::to_vec(&self.json_value(&s.root, col, i).map_err(|e| bad(i, e))?)
                    .map_err(|e| bad(i, e.to_string()))?
            } else {
                let mut buf = Vec::with_capacity(16);
                self.avro(&s.root, col, i, &mut buf).map_err(|e| bad(i, e))?;
                buf
            };
            out.push(Bytes::from(bytes));
        }
        Ok(out)
    }

    fn source_json(&self, node: &Node, src: &Source<'_>, i: usize) -> std::result::Result<Value, String> {
        match src {
            Source::Column(a) => self.json_value(node, a, i),
            Source::Default(v) => Ok((*v).clone()),
            Source::Null => Ok(Value::Null),
        }
    }

    fn source_avro(
        &self,
        node: &Node,
        src: &Source<'_>,
        i: usize,
        out: &mut Vec<u8>,
    ) -> std::result::Result<(), String> {
        match src {
            Source::Column(a) => self.avro(node, a, i, out),
            Source::Default(v) => default_avro(&self.schema, node, v, out),
            Source::Null => null_branch(node, out),
        }
    }

    /// Row `i` of `a` as Avro binary of `node`.
    fn avro(&self, node: &Node, a: &ArrayRef, i: usize, out: &mut Vec<u8>) -> std::result::Result<(), String> {
        if let Node::Union(branches) = node {
            if a.is_null(i) {
                return null_branch(node, out);
            }
            let (k, branch) = branch_of(branches, a, i)?;
            put_long(out, k as i64);
            if let (DataType::Struct(_), true) = (a.data_type(), members(branches)) {
                let s = a.as_struct();
                let m = s.columns().iter().position(|c| !c.is_null(i)).unwrap_or(0);
                return self.avro(branch, s.column(m), i, out);
            }
            return self.avro(branch, a, i, out);
        }
        if a.is_null(i) {
            return Err("null where the schema has no null".into());
        }
        match node {
            Node::Null => {}
            Node::Boolean => {
                let b = a.as_boolean_opt().ok_or_else(|| wrong(node, a))?;
                out.push(u8::from(b.value(i)));
            }
            Node::Int | Node::Date => {
                let n = int_at(a, i).ok_or_else(|| wrong(node, a))?;
                put_long(
                    out,
                    i32::try_from(n)
                        .map_err(|_| format!("{n} out of range for an int"))?
                        .into(),
                );
            }
            Node::Long => put_long(out, int_at(a, i).ok_or_else(|| wrong(node, a))?),
            Node::TimestampMillis => put_long(out, micros_at(a, i).ok_or_else(|| wrong(node, a))?.div_euclid(1000)),
            Node::TimestampMicros => put_long(out, micros_at(a, i).ok_or_else(|| wrong(node, a))?),
            Node::Float => out.extend_from_slice(&(float_at(a, i).ok_or_else(|| wrong(node, a))? as f32).to_le_bytes()),
            Node::Double => out.extend_from_slice(&float_at(a, i).ok_or_else(|| wrong(node, a))?.to_le_bytes()),
            Node::String => {
                let s = str_at(a, i).ok_or_else(|| wrong(node, a))?;
                put_long(out, s.len() as i64);
                out.extend_from_slice(s.as_bytes());
            }
            Node::Enum(e) => {
                let s = str_at(a, i).ok_or_else(|| wrong(node, a))?;
                let k = self.schema.enums[*e]
                    .symbols
                    .iter()
                    .position(|x| x == s)
                    .ok_or_else(|| format!("{s:?} is not a symbol of {}", self.schema.enums[*e].name))?;
                put_long(out, k as i64);
            }
            Node::Bytes | Node::Fixed(_) => {
                let b = bytes_at(a, i).ok_or_else(|| wrong(node, a))?;
                match node {
                    Node::Fixed(n) if b.len() != *n => return Err(format!("{} bytes where {n} are expected", b.len())),
                    Node::Fixed(_) => {}
                    _ => put_long(out, b.len() as i64),
                }
                out.extend_from_slice(b);
            }
            Node::Decimal { scale, fixed, .. } => {
                let v = decimal_at(a, i, *scale)?;
                let be = v.to_be_bytes();
                let size = match fixed {
                    Some(n) => *n,
                    None => minimal_len(v),
                };
                if size > 16 || size < minimal_len(v) {
                    return Err(format!("{v} does not fit {size} bytes"));
                }
                let bytes = &be[16 - size..];
                if fixed.is_none() {
                    put_long(out, bytes.len() as i64);
                }
                out.extend_from_slice(bytes);
            }
            Node::Record(r) => {
                let s = a.as_struct_opt().ok_or_else(|| wrong(node, a))?;
                let rec = &self.schema.records[*r];
                let srcs = sources(rec, |name| s.column_by_name(name)).map_err(|e| e.message().to_string())?;
                for (f, src) in rec.fields.iter().zip(&srcs) {
                    self.source_avro(&f.node, src, i, out)
                        .map_err(|e| format!("{}: {e}", f.name))?;
                }
            }
            Node::Array(item) => {
                let l = a.as_list_opt::<i32>().ok_or_else(|| wrong(node, a))?;
                let items = l.value(i);
                if !items.is_empty() {
                    put_long(out, items.len() as i64);
                    for j in 0..items.len() {
                        self.avro(item, &items, j, out)?;
                    }
                }
                put_long(out, 0);
            }
            Node::Map(values) => {
                let m = a.as_map_opt().ok_or_else(|| wrong(node, a))?;
                let (lo, hi) = (m.value_offsets()[i] as usize, m.value_offsets()[i + 1] as usize);
                if hi > lo {
                    put_long(out, (hi - lo) as i64);
                    for j in lo..hi {
                        let k = str_at(m.keys(), j).ok_or("map keys must be strings")?;
                        put_long(out, k.len() as i64);
                        out.extend_from_slice(k.as_bytes());
                        self.avro(values, m.values(), j, out)?;
                    }
                }
                put_long(out, 0);
            }
            Node::Union(_) => unreachable_union()?,
        }
        Ok(())
    }

    /// Row `i` of `a` as the JSON of `node` (the Java client's Jackson form: bytes in base64,
    /// timestamps in their unit since the epoch, dates in days, enums by symbol).
    fn json_value(&self, node: &Node, a: &ArrayRef, i: usize) -> std::result::Result<Value, String> {
        if a.is_null(i) {
            return match node {
                Node::Union(b) if b.contains(&Node::Null) => Ok(Value::Null),
                Node::Null => Ok(Value::Null),
                _ => Err("null where the schema has no null".into()),
            };
        }
        Ok(match node {
            Node::Union(branches) => {
                let (_, branch) = branch_of(branches, a, i)?;
                if let (DataType::Struct(_), true) = (a.data_type(), members(branches)) {
                    let s = a.as_struct();
                    let m = s.columns().iter().position(|c| !c.is_null(i)).unwrap_or(0);
                    return self.json_value(branch, s.column(m), i);
                }
                self.json_value(branch, a, i)?
            }
            Node::Null => Value::Null,
            Node::Boolean => Value::Bool(a.as_boolean_opt().ok_or_else(|| wrong(node, a))?.value(i)),
            Node::Int | Node::Long | Node::Date => Value::from(int_at(a, i).ok_or_else(|| wrong(node, a))?),
            Node::TimestampMillis => Value::from(micros_at(a, i).ok_or_else(|| wrong(node, a))?.div_euclid(1000)),
            Node::TimestampMicros => Value::from(micros_at(a, i).ok_or_else(|| wrong(node, a))?),
            Node::Float | Node::Double => serde_json::Number::from_f64(float_at(a, i).ok_or_else(|| wrong(node, a))?)
                .map(Value::Number)
                .ok_or("not a finite number")?,
            Node::String | Node::Enum(_) => Value::String(str_at(a, i).ok_or_else(|| wrong(node, a))?.to_string()),
            Node::Bytes | Node::Fixed(_) => Value::String(
                base64::engine::general_purpose::STANDARD.encode(bytes_at(a, i).ok_or_else(|| wrong(node, a))?),
            ),
            Node::Decimal { scale, .. } => Value::String(decimal_text(decimal_at(a, i, *scale)?, *scale)),
            Node::Record(r) => {
                let s = a.as_struct_opt().ok_or_else(|| wrong(node, a))?;
                let rec = &self.schema.records[*r];
                let srcs = sources(rec, |name| s.column_by_name(name)).map_err(|e| e.message().to_string())?;
                let mut o = Map::new();
                for (f, src) in rec.fields.iter().zip(&srcs) {
                    o.insert(
                        f.name.clone(),
                        self.source_json(&f.node, src, i)
                            .map_err(|e| format!("{}: {e}", f.name))?,
                    );
                }
                Value::Object(o)
            }
            Node::Array(item) => {
                let items = a.as_list_opt::<i32>().ok_or_else(|| wrong(node, a))?.value(i);
                Value::Array(
                    (0..items.len())
                        .map(|j| self.json_value(item, &items, j))
                        .collect::<std::result::Result<_, _>>()?,
                )
            }
            Node::Map(values) => {
                let m = a.as_map_opt().ok_or_else(|| wrong(node, a))?;
                let mut o = Map::new();
                for j in m.value_offsets()[i] as usize..m.value_offsets()[i + 1] as usize {
                    let k = str_at(m.keys(), j).ok_or("map keys must be strings")?;
                    o.insert(k.to_string(), self.json_value(values, m.values(), j)?);
                }
                Value::Object(o)
            }
        })
    }
}

fn unreachable_union() -> std::result::Result<(), String> {
    Err("a union directly inside a union".into())
}

/// For each field of `rec`: its column, or its default, or null (a union with null).
fn sources<'a>(rec: &'a Record, column: impl Fn(&str) -> Option<&'a ArrayRef>) -> Result<Vec<Source<'a>>> {
    rec.fields
        .iter()
        .map(|f| {
            if let Some(c) = column(&f.name) {
                return Ok(Source::Column(c));
            }
            match (&f.default, &f.node) {
                (Some(v), _) => Ok(Source::Default(v)),
                (None, Node::Union(b)) if b.contains(&Node::Null) => Ok(Source::Null),
                _ => Err(Error::invalid(format!(
                    "the topic's schema ({}) needs a column {:?}: the field has no default",
                    rec.name, f.name
                ))),
            }
        })
        .collect()
}

/// Whether a union of several non-null types is read as a struct of members.
fn members(branches: &[Node]) -> bool {
    let others: Vec<&Node> = branches.iter().filter(|b| **b != Node::Null).collect();
    others.len() > 1
        && !matches!(
            others.as_slice(),
            [Node::Int, Node::Long]
                | [Node::Long, Node::Int]
                | [Node::Float, Node::Double]
                | [Node::Double, Node::Float]
        )
}

/// The branch of a union a non-null value takes: the set member of a member struct, the wider
/// of int/long and float/double, or the one non-null branch.
fn branch_of<'n>(branches: &'n [Node], a: &ArrayRef, i: usize) -> std::result::Result<(usize, &'n Node), String> {
    let non_null: Vec<(usize, &Node)> = branches.iter().enumerate().filter(|(_, b)| **b != Node::Null).collect();
    let pick = if members(branches) {
        let s = a
            .as_struct_opt()
            .ok_or("a union of several types needs a struct of members")?;
        let m = s
            .columns()
            .iter()
            .position(|c| !c.is_null(i))
            .ok_or("no member of the union is set")?;
        *non_null.get(m).ok_or("more members than union branches")?
    } else {
        let wider = non_null.iter().find(|(_, b)| matches!(b, Node::Long | Node::Double));
        *wider.or(non_null.first()).ok_or("a union of null alone")?
    };
    Ok(pick)
}

fn null_branch(node: &Node, out: &mut Vec<u8>) -> std::result::Result<(), String> {
    match node {
        Node::Union(b) => {
            let k = b
                .iter()
                .position(|x| *x == Node::Null)
                .ok_or("null where the union has no null")?;
            put_long(out, k as i64);
            Ok(())
        }
        Node::Null => Ok(()),
        _ => Err("null where the schema has no null".into()),
    }
}

/// A field default (Avro's JSON form: a union's default is of its first branch).
fn default_avro(s: &AvroSchema, node: &Node, v: &Value, out: &mut Vec<u8>) -> std::result::Result<(), String> {
    let bad = || format!("default {v} does not fit {node:?}");
    match node {
        Node::Union(b) => {
            put_long(out, 0);
            default_avro(s, b.first().ok_or_else(bad)?, v, out)
        }
        Node::Null => Ok(()),
        Node::Boolean => {
            out.push(u8::from(v.as_bool().ok_or_else(bad)?));
            Ok(())
        }
        Node::Int | Node::Long | Node::Date | Node::TimestampMillis | Node::TimestampMicros => {
            put_long(out, v.as_i64().ok_or_else(bad)?);
            Ok(())
        }
        Node::Float => {
            out.extend_from_slice(&(v.as_f64().ok_or_else(bad)? as f32).to_le_bytes());
            Ok(())
        }
        Node::Double => {
            out.extend_from_slice(&v.as_f64().ok_or_else(bad)?.to_le_bytes());
            Ok(())
        }
        Node::String | Node::Bytes | Node::Fixed(_) | Node::Decimal { .. } => {
            // bytes defaults are strings of code points 0-255
            let s = v.as_str().ok_or_else(bad)?;
            let bytes: Vec<u8> = match node {
                Node::String => s.as_bytes().to_vec(),
                _ => s
                    .chars()
                    .map(|c| u8::try_from(u32::from(c)).map_err(|_| bad()))
                    .collect::<std::result::Result<_, _>>()?,
            };
            if !matches!(node, Node::Fixed(_) | Node::Decimal { fixed: Some(_), .. }) {
                put_long(out, bytes.len() as i64);
            }
            out.extend_from_slice(&bytes);
            Ok(())
        }
        Node::Enum(e) => {
            let sym = v.as_str().ok_or_else(bad)?;
            let k = s.enums[*e].symbols.iter().position(|x| x == sym).ok_or_else(bad)?;
            put_long(out, k as i64);
            Ok(())
        }
        Node::Record(r) => {
            let o = v.as_object().ok_or_else(bad)?;
            for f in &s.records[*r].fields {
                let fv = o.get(&f.name).or(f.default.as_ref()).ok_or_else(bad)?;
                default_avro(s, &f.node, fv, out)?;
            }
            Ok(())
        }
        Node::Array(item) => {
            let items = v.as_array().ok_or_else(bad)?;
            if !items.is_empty() {
                put_long(out, items.len() as i64);
                for x in items {
                    default_avro(s, item, x, out)?;
                }
            }
            put_long(out, 0);
            Ok(())
        }
        Node::Map(values) => {
            let o = v.as_object().ok_or_else(bad)?;
            if !o.is_empty() {
                put_long(out, o.len() as i64);
                for (k, x) in o {
                    put_long(out, k.len() as i64);
                    out.extend_from_slice(k.as_bytes());
                    default_avro(s, values, x, out)?;
                }
            }
            put_long(out, 0);
            Ok(())
        }
    }
}

fn wrong(node: &Node, a: &ArrayRef) -> String {
    format!("a column of {} cannot hold {node:?}", a.data_type())
}

fn int_at(a: &ArrayRef, i: usize) -> Option<i64> {
    Some(match a.data_type() {
        DataType::Int8 => a.as_primitive::<Int8Type>().value(i).into(),
        DataType::Int16 => a.as_primitive::<Int16Type>().value(i).into(),
        DataType::Int32 => a.as_primitive::<Int32Type>().value(i).into(),
        DataType::Int64 => a.as_primitive::<Int64Type>().value(i),
        DataType::UInt8 => a.as_primitive::<UInt8Type>().value(i).into(),
        DataType::UInt16 => a.as_primitive::<UInt16Type>().value(i).into(),
        DataType::UInt32 => a.as_primitive::<UInt32Type>().value(i).into(),
        DataType::UInt64 => i64::try_from(a.as_primitive::<UInt64Type>().value(i)).ok()?,
        DataType::Date32 => a.as_primitive::<Date32Type>().value(i).into(),
        _ => return None,
    })
}

fn float_at(a: &ArrayRef, i: usize) -> Option<f64> {
    match a.data_type() {
        DataType::Float32 => Some(a.as_primitive::<Float32Type>().value(i).into()),
        DataType::Float64 => Some(a.as_primitive::<Float64Type>().value(i)),
        _ => int_at(a, i).map(|n| n as f64),
    }
}

fn micros_at(a: &ArrayRef, i: usize) -> Option<i64> {
    Some(match a.data_type() {
        DataType::Timestamp(TimeUnit::Second, _) => a
            .as_primitive::<TimestampSecondType>()
            .value(i)
            .saturating_mul(1_000_000),
        DataType::Timestamp(TimeUnit::Millisecond, _) => a
            .as_primitive::<TimestampMillisecondType>()
            .value(i)
            .saturating_mul(1000),
        DataType::Timestamp(TimeUnit::Microsecond, _) => a.as_primitive::<TimestampMicrosecondType>().value(i),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => {
            a.as_primitive::<TimestampNanosecondType>().value(i).div_euclid(1000)
        }
        _ => return None,
    })
}

fn str_at(a: &ArrayRef, i: usize) -> Option<&str> {
    match a.data_type() {
        DataType::Utf8 => Some(a.as_string::<i32>().value(i)),
        DataType::LargeUtf8 => Some(a.as_string::<i64>().value(i)),
        DataType::Utf8View => Some(a.as_string_view().value(i)),
        _ => None,
    }
}

fn bytes_at(a: &ArrayRef, i: usize) -> Option<&[u8]> {
    match a.data_type() {
        DataType::Binary => Some(a.as_binary::<i32>().value(i)),
        DataType::LargeBinary => Some(a.as_binary::<i64>().value(i)),
        DataType::FixedSizeBinary(_) => Some(a.as_fixed_size_binary().value(i)),
        DataType::BinaryView => Some(a.as_binary_view().value(i)),
        _ => str_at(a, i).map(str::as_bytes),
    }
}

fn decimal_at(a: &ArrayRef, i: usize, scale: u32) -> std::result::Result<i128, String> {
    match a.data_type() {
        DataType::Decimal128(_, s) if i64::from(*s) == i64::from(scale) => {
            Ok(a.as_primitive::<Decimal128Type>().value(i))
        }
        t => Err(format!(
            "a decimal of scale {scale} needs a decimal column of that scale, not {t}"
        )),
    }
}

/// The fewest bytes of `v` in two's complement.
fn minimal_len(v: i128) -> usize {
    let bits = if v < 0 {
        128 - (!v).leading_zeros()
    } else {
        128 - v.leading_zeros()
    };
    (bits as usize + 1).div_ceil(8).max(1)
}

fn decimal_text(v: i128, scale: u32) -> String {
    let digits = v.unsigned_abs().to_string();
    let scale = scale as usize;
    let sign = if v < 0 { "-" } else { "" };
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
}

#[cfg(test)]
#[path = "schema_write_tests.rs"]
mod tests;
