//! The column builders of [`super::schema_read`]: an Arrow builder per column of the type the
//! caller asks for, filled from Avro binary (with the writer's type, resolved to the reader's)
//! or from JSON (with the reader's type). Nested types nest builders; a row a record does not
//! set is completed with the field's default or null.
//!
//! This file holds the builders, their construction from the two types, nulls, defaults and
//! the finished arrays; the filling is in [`avro`] (Avro binary) and [`json`] (JSON).

use std::sync::Arc;

use arrow_array::builder::{
    ArrayBuilder, BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder, Float64Builder,
    Int16Builder, Int32Builder, Int64Builder, Int8Builder, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow_array::types::{Decimal128Type, DecimalType};
use arrow_array::{ArrayRef, ListArray, MapArray, StructArray};
use arrow_buffer::{NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType, Field, FieldRef, Fields, TimeUnit};
use serde_json::Value;

pub(super) use self::avro::Input;
#[cfg(test)]
pub(super) use self::avro::MAX_EMPTY_ITEMS;
pub(super) use self::json::Text;
use crate::protocol::avro::{AvroSchema, Node};

mod avro;
mod json;

/// `[int, long]` and `[float, double]` read as their wider type, as Spark reads them.
pub(super) fn widened(branches: &[&Node]) -> Option<DataType> {
    match branches {
        [Node::Int, Node::Long] | [Node::Long, Node::Int] => Some(DataType::Int64),
        [Node::Float, Node::Double] | [Node::Double, Node::Float] => Some(DataType::Float64),
        _ => None,
    }
}

pub(super) fn map_type(values: DataType, nullable: bool) -> DataType {
    let entries = Fields::from(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("value", values, nullable),
    ]);
    DataType::Map(Arc::new(Field::new("entries", DataType::Struct(entries), false)), false)
}

/// A column being built: its Arrow builder and, for nested types, how the Avro type maps.
#[derive(Debug)]
pub(super) enum Col {
    Bool(BooleanBuilder),
    I8(Int8Builder),
    I16(Int16Builder),
    I32(Int32Builder),
    I64(Int64Builder),
    F32(Float32Builder),
    F64(Float64Builder),
    Bin(BinaryBuilder),
    Str(StringBuilder),
    /// With the microseconds of one unit of the reader's type (JSON numbers are in it).
    Ts(TimestampMicrosecondBuilder, i64),
    Date(Date32Builder),
    /// With the scale and the precision.
    Dec(Decimal128Builder, u32, u8),
    Struct(Box<StructCol>),
    /// A union of several types: one member per non-null branch.
    Members(Box<StructCol>),
    List(Box<ListCol>),
    Map(Box<MapCol>),
}

#[derive(Debug)]
pub(super) struct StructCol {
    fields: Fields,
    cols: Vec<Col>,
    defaults: Vec<Option<Value>>,
    /// Of a union's members: the reader's branch each stands for, as [`shape`] names it.
    shapes: Vec<String>,
    nulls: NullBufferBuilder,
    len: usize,
}

#[derive(Debug)]
pub(super) struct ListCol {
    field: FieldRef,
    item: Col,
    offsets: Vec<i32>,
    nulls: NullBufferBuilder,
}

#[derive(Debug)]
pub(super) struct MapCol {
    entries: FieldRef,
    keys: StringBuilder,
    values: Col,
    /// Whether the values' type holds nulls.
    nullable: bool,
    offsets: Vec<i32>,
    nulls: NullBufferBuilder,
}

fn offset(n: usize) -> Result<i32, String> {
    i32::try_from(n).map_err(|_| "more items than one Arrow list holds".to_string())
}

impl StructCol {
    fn new(fields: Fields, cols: Vec<Col>, defaults: Vec<Option<Value>>) -> StructCol {
        StructCol {
            fields,
            cols,
            defaults,
            shapes: Vec::new(),
            nulls: NullBufferBuilder::new(0),
            len: 0,
        }
    }

    /// A row of a union: member `k` set by `set`, the others null.
    fn set_member(&mut self, k: usize, set: impl FnOnce(&mut Col) -> Result<bool, String>) -> Result<bool, String> {
        for (j, c) in self.cols.iter_mut().enumerate() {
            if j != k {
                c.null();
            }
        }
        set(&mut self.cols[k]).map_err(|e| format!("{}: {e}", self.fields[k].name()))?;
        self.nulls.append_non_null();
        self.len += 1;
        Ok(false)
    }

    fn null(&mut self) {
        self.nulls.append_null();
        self.len += 1;
        for c in &mut self.cols {
            c.null();
        }
    }

    /// Fills what a row did not set: the field's default, or null.
    fn complete_row(&mut self) -> Result<(), String> {
        for (j, c) in self.cols.iter_mut().enumerate() {
            if c.len() <= self.len {
                match &self.defaults[j] {
                    Some(v) => c
                        .json(v, Text::AvroDefault)
                        .and_then(|null| not_null(null, self.fields[j].is_nullable()))
                        .map_err(|e| format!("the default of {}: {e}", self.fields[j].name()))?,
                    None if !self.fields[j].is_nullable() => {
                        return Err(format!("{}: missing and without a default", self.fields[j].name()))
                    }
                    None => c.null(),
                }
            }
        }
        self.nulls.append_non_null();
        self.len += 1;
        Ok(())
    }
}

impl Col {
    /// A builder of type `t` for values of Avro type `node`; an error when they do not fit.
    pub(super) fn new(s: &AvroSchema, node: &Node, t: &DataType) -> Result<Col, String> {
        let wrong = || format!("a column of {node:?} cannot be {t}");
        Ok(match node {
            Node::Union(branches) => {
                let others: Vec<&Node> = branches.iter().filter(|b| **b != Node::Null).collect();
                match (others.as_slice(), t) {
                    ([], _) => return Err(wrong()),
                    ([one], _) => Col::new(s, one, t)?,
                    (many, DataType::Struct(f)) if widened(many).is_none() => {
                        if f.len() != many.len() {
                            return Err(wrong());
                        }
                        let cols = many
                            .iter()
                            .zip(f.iter())
                            .map(|(b, x)| Col::new(s, b, x.data_type()))
                            .collect::<Result<Vec<_>, String>>()?;
                        let mut m = StructCol::new(f.clone(), cols, vec![None; many.len()]);
                        m.shapes = many.iter().map(|b| shape(s, b)).collect();
                        Col::Members(Box::new(m))
                    }
                    (many, _) => Col::new(s, if widened(many).is_some() { many[1] } else { many[0] }, t)?,
                }
            }
            Node::Record(i) => {
                let DataType::Struct(f) = t else { return Err(wrong()) };
                let rec = &s.records[*i];
                let mut cols = Vec::with_capacity(f.len());
                let mut defaults = Vec::with_capacity(f.len());
                for x in f.iter() {
                    let Some(field) = rec.fields.iter().find(|rf| rf.name == *x.name()) else {
                        return Err(format!("record {} has no field {:?}", rec.name, x.name()));
                    };
                    cols.push(Col::new(s, &field.node, x.data_type()).map_err(|e| format!("{}: {e}", x.name()))?);
                    defaults.push(field.default.clone());
                }
                Col::Struct(Box::new(StructCol::new(f.clone(), cols, defaults)))
            }
            Node::Array(item) => {
                let DataType::List(f) = t else { return Err(wrong()) };
                Col::List(Box::new(ListCol {
                    field: f.clone(),
                    item: Col::new(s, item, f.data_type())?,
                    offsets: vec![0],
                    nulls: NullBufferBuilder::new(0),
                }))
            }
            Node::Map(values) => {
                let DataType::Map(entries, _) = t else {
                    return Err(wrong());
                };
                let DataType::Struct(kv) = entries.data_type() else {
                    return Err(wrong());
                };
                if kv.len() != 2 || *kv[0].data_type() != DataType::Utf8 {
                    return Err(wrong());
                }
                Col::Map(Box::new(MapCol {
                    entries: entries.clone(),
                    keys: StringBuilder::new(),
                    values: Col::new(s, values, kv[1].data_type())?,
                    nullable: kv[1].is_nullable(),
                    offsets: vec![0],
                    nulls: NullBufferBuilder::new(0),
                }))
            }
            Node::TimestampMillis | Node::TimestampMicros => match t {
                DataType::Timestamp(TimeUnit::Microsecond, tz) => Col::Ts(
                    TimestampMicrosecondBuilder::new().with_timezone_opt(tz.clone()),
                    if *node == Node::TimestampMillis { 1000 } else { 1 },
                ),
                _ => return Err(wrong()),
            },
            Node::Decimal { scale, .. } => match t {
                DataType::Decimal128(p, sc) if i64::from(*sc) == i64::from(*scale) => Col::Dec(
                    Decimal128Builder::new()
                        .with_precision_and_scale(*p, *sc)
                        .map_err(|e| e.to_string())?,
                    *scale,
                    *p,
                ),
                _ => return Err(wrong()),
            },
            _ => {
                let fits = matches!(
                    (node, t),
                    (Node::Boolean, DataType::Boolean)
                        | (Node::Int, DataType::Int32)
                        | (Node::Long, DataType::Int64)
                        | (Node::Float, DataType::Float32)
                        | (Node::Double, DataType::Float64)
                        | (Node::Bytes | Node::Fixed(_), DataType::Binary)
                        | (Node::String | Node::Enum(_), DataType::Utf8)
                        | (Node::Date, DataType::Date32)
                        | (Node::Int | Node::Long, DataType::Int64 | DataType::Float64)
                        | (Node::Float, DataType::Float64)
                );
                if !fits {
                    return Err(wrong());
                }
                Col::of_type(t).ok_or_else(wrong)?
            }
        })
    }

    pub(super) fn of_type(t: &DataType) -> Option<Col> {
        Some(match t {
            DataType::Boolean => Col::Bool(BooleanBuilder::new()),
            DataType::Int8 => Col::I8(Int8Builder::new()),
            DataType::Int16 => Col::I16(Int16Builder::new()),
            DataType::Int32 => Col::I32(Int32Builder::new()),
            DataType::Int64 => Col::I64(Int64Builder::new()),
            DataType::Float32 => Col::F32(Float32Builder::new()),
            DataType::Float64 => Col::F64(Float64Builder::new()),
            DataType::Binary => Col::Bin(BinaryBuilder::new()),
            DataType::Utf8 => Col::Str(StringBuilder::new()),
            DataType::Date32 => Col::Date(Date32Builder::new()),
            _ => return None,
        })
    }

    fn len(&self) -> usize {
        match self {
            Col::Bool(b) => b.len(),
            Col::I8(b) => b.len(),
            Col::I16(b) => b.len(),
            Col::I32(b) => b.len(),
            Col::I64(b) => b.len(),
            Col::F32(b) => b.len(),
            Col::F64(b) => b.len(),
            Col::Bin(b) => b.len(),
            Col::Str(b) => b.len(),
            Col::Ts(b, _) => b.len(),
            Col::Date(b) => b.len(),
            Col::Dec(b, ..) => b.len(),
            Col::Struct(c) | Col::Members(c) => c.len,
            Col::List(c) => c.offsets.len() - 1,
            Col::Map(c) => c.offsets.len() - 1,
        }
    }

    pub(super) fn null(&mut self) {
        match self {
            Col::Bool(b) => b.append_null(),
            Col::I8(b) => b.append_null(),
            Col::I16(b) => b.append_null(),
            Col::I32(b) => b.append_null(),
            Col::I64(b) => b.append_null(),
            Col::F32(b) => b.append_null(),
            Col::F64(b) => b.append_null(),
            Col::Bin(b) => b.append_null(),
            Col::Str(b) => b.append_null(),
            Col::Ts(b, _) => b.append_null(),
            Col::Date(b) => b.append_null(),
            Col::Dec(b, ..) => b.append_null(),
            Col::Struct(c) | Col::Members(c) => c.null(),
            Col::List(c) => {
                c.offsets.push(*c.offsets.last().unwrap_or(&0));
                c.nulls.append_null();
            }
            Col::Map(c) => {
                c.offsets.push(*c.offsets.last().unwrap_or(&0));
                c.nulls.append_null();
            }
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Col::Bool(_) => "boolean",
            Col::I8(_) | Col::I16(_) | Col::I32(_) => "int",
            Col::I64(_) => "long",
            Col::F32(_) => "float",
            Col::F64(_) => "double",
            Col::Bin(_) => "bytes",
            Col::Str(_) => "string",
            Col::Ts(..) => "timestamp",
            Col::Date(_) => "date",
            Col::Dec(..) => "decimal",
            Col::Struct(_) => "record",
            Col::Members(_) => "union",
            Col::List(_) => "array",
            Col::Map(_) => "map",
        }
    }

    pub(super) fn finish(self) -> Result<ArrayRef, ArrowError> {
        Ok(match self {
            Col::Bool(mut b) => Arc::new(b.finish()),
            Col::I8(mut b) => Arc::new(b.finish()),
            Col::I16(mut b) => Arc::new(b.finish()),
            Col::I32(mut b) => Arc::new(b.finish()),
            Col::I64(mut b) => Arc::new(b.finish()),
            Col::F32(mut b) => Arc::new(b.finish()),
            Col::F64(mut b) => Arc::new(b.finish()),
            Col::Bin(mut b) => Arc::new(b.finish()),
            Col::Str(mut b) => Arc::new(b.finish()),
            Col::Ts(mut b, _) => Arc::new(b.finish()),
            Col::Date(mut b) => Arc::new(b.finish()),
            Col::Dec(mut b, ..) => Arc::new(b.finish()),
            Col::Struct(c) | Col::Members(c) => {
                let mut c = *c;
                let cols = c.cols.into_iter().map(Col::finish).collect::<Result<Vec<_>, _>>()?;
                if cols.is_empty() {
                    Arc::new(StructArray::new_empty_fields(c.len, c.nulls.finish()))
                } else {
                    Arc::new(StructArray::try_new(c.fields, cols, c.nulls.finish())?)
                }
            }
            Col::List(c) => {
                let mut c = *c;
                Arc::new(ListArray::try_new(
                    c.field,
                    OffsetBuffer::new(ScalarBuffer::from(c.offsets)),
                    c.item.finish()?,
                    c.nulls.finish(),
                )?)
            }
            Col::Map(c) => {
                let mut c = *c;
                let DataType::Struct(kv) = c.entries.data_type() else {
                    return Err(ArrowError::SchemaError("map entries must be a struct".into()));
                };
                let entries =
                    StructArray::try_new(kv.clone(), vec![Arc::new(c.keys.finish()), c.values.finish()?], None)?;
                Arc::new(MapArray::try_new(
                    c.entries,
                    OffsetBuffer::new(ScalarBuffer::from(c.offsets)),
                    entries,
                    c.nulls.finish(),
                    false,
                )?)
            }
        })
    }
}

/// `n` units of `unit` microseconds, refused rather than clamped when it overflows (as Spark's
/// exact multiplication throws).
pub(super) fn micros(n: i64, unit: i64) -> Result<i64, String> {
    n.checked_mul(unit)
        .ok_or_else(|| format!("{n} is out of range for a timestamp"))
}

/// A null where the type holds none is the payload's fault, named here rather than left for
/// Arrow to refuse when the batch is built.
fn not_null(null: bool, nullable: bool) -> Result<(), String> {
    if null && !nullable {
        return Err("null where the type holds none".into());
    }
    Ok(())
}

/// An unscaled decimal that must fit the column's precision (Spark refuses a wider one).
fn decimal(n: i128, precision: u8) -> Result<i128, String> {
    Decimal128Type::validate_decimal_precision(n, precision)
        .map_err(|_| format!("{n} (unscaled) has more than {precision} digits"))?;
    Ok(n)
}

/// How a union member is matched to a writer's type: the Avro type under any logical type,
/// with the name of a named one (resolution compares unqualified names, and fixed sizes).
fn shape(s: &AvroSchema, n: &Node) -> String {
    match n {
        Node::Record(i) => format!("record {}", s.records[*i].name),
        Node::Enum(i) => format!("enum {}", s.enums[*i].name),
        Node::Fixed(k) | Node::Decimal { fixed: Some(k), .. } => format!("fixed of {k}"),
        Node::Decimal { fixed: None, .. } => "bytes".into(),
        Node::Date => "int".into(),
        Node::TimestampMillis | Node::TimestampMicros => "long".into(),
        other => node_kind(other),
    }
}

fn node_kind(n: &Node) -> String {
    match n {
        Node::Record(_) => "record".into(),
        Node::Array(_) => "array".into(),
        Node::Map(_) => "map".into(),
        Node::Enum(_) => "enum".into(),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// A big-endian two's complement integer of up to 16 bytes.
pub(super) fn unscaled(b: &[u8]) -> Result<i128, String> {
    if b.len() > 16 {
        return Err(format!("a decimal of {} bytes is wider than 38 digits", b.len()));
    }
    let fill = if b.first().is_some_and(|x| x & 0x80 != 0) {
        0xFF
    } else {
        0
    };
    let mut out = [fill; 16];
    out[16 - b.len()..].copy_from_slice(b);
    Ok(i128::from_be_bytes(out))
}

/// The unscaled value of decimal text at `scale` ("-12.5" at scale 2 is -1250).
pub(super) fn parse_decimal(text: &str, scale: u32) -> Option<i128> {
    let (neg, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if frac.len() > scale as usize || (int.is_empty() && frac.is_empty()) {
        return None;
    }
    let mut n: i128 = 0;
    for c in int
        .chars()
        .chain(frac.chars())
        .chain(std::iter::repeat_n('0', scale as usize - frac.len()))
    {
        n = n.checked_mul(10)?.checked_add(i128::from(c.to_digit(10)?))?;
    }
    Some(if neg { -n } else { n })
}
