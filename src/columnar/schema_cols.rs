//! The column builders of [`super::schema_read`]: an Arrow builder per column of the type the
//! caller asks for, filled from Avro binary (with the writer's type, resolved to the reader's)
//! or from JSON (with the reader's type). Nested types nest builders; a row a record does not
//! set is completed with the field's default or null.

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

use crate::protocol::avro::{get_long, take, AvroSchema, Node, Record};

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

    /// The member a writer's datum of type `node` goes to: the first whose type is the
    /// writer's, else the first the writer's type promotes to (the Avro resolution of a union).
    fn member(&self, w: &AvroSchema, node: &Node) -> Result<usize, String> {
        let writer = shape(w, node);
        let promoted: &[&str] = match writer.as_str() {
            "int" => &["long", "float", "double"],
            "long" => &["float", "double"],
            "float" => &["double"],
            "string" => &["bytes"],
            "bytes" => &["string"],
            _ => &[],
        };
        self.shapes
            .iter()
            .position(|s| *s == writer)
            .or_else(|| self.shapes.iter().position(|s| promoted.contains(&s.as_str())))
            .ok_or_else(|| format!("the writer's {writer} is no member of the reader's union"))
    }

    /// The member a JSON value goes to: the first whose type takes that kind of value as it
    /// is (an integer an integer type, a string a string), else the first that takes it at all.
    fn json_member(&self, v: &Value) -> Result<usize, String> {
        let strict = |c: &Col| match c {
            Col::Bool(_) => v.is_boolean(),
            Col::I8(_) | Col::I16(_) | Col::I32(_) | Col::I64(_) | Col::Ts(..) | Col::Date(_) => v.is_i64(),
            Col::F32(_) | Col::F64(_) => v.is_f64(),
            Col::Str(_) => v.is_string(),
            Col::Bin(_) | Col::Dec(..) => false,
            Col::Struct(_) | Col::Map(_) => v.is_object(),
            Col::List(_) => v.is_array(),
            Col::Members(_) => true,
        };
        let loose = |c: &Col| match c {
            Col::F32(_) | Col::F64(_) => v.is_number(),
            Col::Bin(_) => v.is_string(),
            Col::Dec(..) => v.is_string() || v.is_number(),
            _ => false,
        };
        self.cols
            .iter()
            .position(strict)
            .or_else(|| self.cols.iter().position(loose))
            .ok_or_else(|| format!("{v} fits no member of the union"))
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

    /// A writer's record, resolved to these fields by name.
    fn avro(&mut self, w: &AvroSchema, rec: &Record, r: &mut Input) -> Result<(), String> {
        for (i, f) in rec.fields.iter().enumerate() {
            let at = match self.fields.get(i) {
                Some(x) if *x.name() == f.name => Some(i),
                _ => self.fields.iter().position(|x| *x.name() == f.name),
            };
            match at {
                Some(j) => self.cols[j]
                    .avro(w, &f.node, r)
                    .and_then(|null| not_null(null, self.fields[j].is_nullable()))
                    .map_err(|e| format!("{}: {e}", f.name))?,
                None => w
                    .skip(&f.node, r.d, &mut r.pos)
                    .map_err(|e| format!("{}: {e}", f.name))?,
            }
        }
        self.complete_row()
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

    /// One Avro binary datum of the writer's type `node` (schema `w`) at `r`; true when it
    /// was null (which the parent refuses where its type holds none).
    pub(super) fn avro(&mut self, w: &AvroSchema, node: &Node, r: &mut Input) -> Result<bool, String> {
        if let Node::Union(branches) = node {
            let i = get_long(r.d, &mut r.pos)?;
            let branch = usize::try_from(i)
                .ok()
                .and_then(|i| branches.get(i))
                .ok_or_else(|| format!("union index {i} out of range"))?;
            return self.avro(w, branch, r);
        }
        if *node == Node::Null {
            self.null();
            return Ok(true);
        }
        if let Col::Members(m) = self {
            let k = m.member(w, node)?;
            return m.set_member(k, |c| c.avro(w, node, r));
        }
        let (d, pos) = (r.d, &mut r.pos);
        let len = |pos: &mut usize| -> Result<usize, String> {
            usize::try_from(get_long(d, pos)?).map_err(|_| "negative length".to_string())
        };
        match (&mut *self, node) {
            (Col::Bool(b), Node::Boolean) => match take(d, pos, 1)?[0] {
                v @ (0 | 1) => b.append_value(v == 1),
                v => return Err(format!("bad boolean byte {v}")),
            },
            (Col::I32(b), Node::Int | Node::Date) => {
                let n = get_long(d, pos)?;
                b.append_value(i32::try_from(n).map_err(|_| format!("{n} out of range for an int"))?);
            }
            (Col::Date(b), Node::Int | Node::Date) => {
                let n = get_long(d, pos)?;
                b.append_value(i32::try_from(n).map_err(|_| format!("{n} out of range for a date"))?);
            }
            (Col::I64(b), Node::Int | Node::Long | Node::TimestampMillis | Node::TimestampMicros) => {
                b.append_value(integer(node, d, pos)?)
            }
            (Col::Ts(b, _), Node::TimestampMillis) => b.append_value(micros(get_long(d, pos)?, 1000)?),
            (Col::Ts(b, _), Node::TimestampMicros) => b.append_value(get_long(d, pos)?),
            // A plain long (or int) is in the reader's unit: the logical type is the reader's.
            (Col::Ts(b, unit), Node::Int | Node::Long) => b.append_value(micros(integer(node, d, pos)?, *unit)?),
            (Col::F32(b), Node::Int | Node::Long) => b.append_value(integer(node, d, pos)? as f32),
            (Col::F32(b), Node::Float) => b.append_value(f32::from_le_bytes(array4(take(d, pos, 4)?))),
            (Col::F64(b), Node::Int | Node::Long) => b.append_value(integer(node, d, pos)? as f64),
            (Col::F64(b), Node::Float) => b.append_value(f64::from(f32::from_le_bytes(array4(take(d, pos, 4)?)))),
            (Col::F64(b), Node::Double) => {
                let bytes: [u8; 8] = take(d, pos, 8)?.try_into().map_err(|_| "truncated double")?;
                b.append_value(f64::from_le_bytes(bytes));
            }
            (Col::Str(b), Node::String | Node::Bytes) => {
                let n = len(pos)?;
                b.append_value(
                    std::str::from_utf8(take(d, pos, n)?).map_err(|e| format!("a string that is not UTF-8: {e}"))?,
                );
            }
            (Col::Str(b), Node::Enum(e)) => {
                let i = get_long(d, pos)?;
                let symbols = &w.enums[*e].symbols;
                let s = usize::try_from(i)
                    .ok()
                    .and_then(|i| symbols.get(i))
                    .ok_or_else(|| format!("enum index {i} out of range"))?;
                b.append_value(s);
            }
            (Col::Bin(b), Node::Bytes | Node::String | Node::Decimal { fixed: None, .. }) => {
                let n = len(pos)?;
                b.append_value(take(d, pos, n)?);
            }
            (Col::Bin(b), Node::Fixed(n) | Node::Decimal { fixed: Some(n), .. }) => b.append_value(take(d, pos, *n)?),
            (Col::Dec(b, scale, precision), Node::Decimal { scale: ws, fixed, .. }) => {
                if ws != scale {
                    return Err(format!("a decimal of scale {ws} read as scale {scale}"));
                }
                let n = match fixed {
                    Some(n) => *n,
                    None => len(pos)?,
                };
                b.append_value(decimal(unscaled(take(d, pos, n)?)?, *precision)?);
            }
            // Plain bytes or fixed read as the reader's decimal (its logical type decides).
            (Col::Dec(b, _, precision), Node::Bytes | Node::Fixed(_)) => {
                let n = match node {
                    Node::Fixed(n) => *n,
                    _ => len(pos)?,
                };
                b.append_value(decimal(unscaled(take(d, pos, n)?)?, *precision)?);
            }
            (Col::Struct(c), Node::Record(i)) => c.avro(w, &w.records[*i], r)?,
            (Col::List(c), Node::Array(item)) => {
                let start = c.offsets.last().copied().unwrap_or(0) as usize;
                let nullable = c.field.is_nullable();
                let n = blocks(r, |r| not_null(c.item.avro(w, item, r)?, nullable))?;
                c.offsets.push(offset(start + n)?);
                c.nulls.append_non_null();
            }
            (Col::Map(c), Node::Map(values)) => {
                let start = c.offsets.last().copied().unwrap_or(0) as usize;
                let n = blocks(r, |r| {
                    let k = usize::try_from(get_long(r.d, &mut r.pos)?).map_err(|_| "negative length")?;
                    c.keys.append_value(
                        std::str::from_utf8(take(r.d, &mut r.pos, k)?).map_err(|_| "a map key that is not UTF-8")?,
                    );
                    not_null(c.values.avro(w, values, r)?, c.nullable)
                })?;
                c.offsets.push(offset(start + n)?);
                c.nulls.append_non_null();
            }
            (col, node) => {
                return Err(format!(
                    "the writer's {} does not resolve to the reader's {}",
                    node_kind(node),
                    col.kind()
                ))
            }
        }
        Ok(false)
    }

    /// One JSON value, read as the reader's type (fields by name); `text` says how bytes are
    /// written.
    pub(super) fn json(&mut self, v: &Value, text: Text) -> Result<bool, String> {
        if v.is_null() {
            self.null();
            return Ok(true);
        }
        let wrong = |what: &str| format!("{v} is not {what}");
        let int = |v: &Value| v.as_i64().ok_or_else(|| wrong("an integer"));
        let bytes = |v: &Value| -> Result<Vec<u8>, String> {
            let s = v.as_str().ok_or_else(|| wrong("a string of bytes"))?;
            match text {
                Text::Payload => {
                    use base64::Engine as _;
                    base64::engine::general_purpose::STANDARD
                        .decode(s)
                        .map_err(|_| wrong("base64"))
                }
                // The Avro specification's JSON of bytes: one code point of 0 to 255 per byte.
                Text::AvroDefault => s
                    .chars()
                    .map(|c| u8::try_from(c).map_err(|_| wrong("bytes (code points up to 255)")))
                    .collect(),
            }
        };
        match self {
            Col::Bool(b) => b.append_value(v.as_bool().ok_or_else(|| wrong("a boolean"))?),
            Col::I8(b) => b.append_value(i8::try_from(int(v)?).map_err(|_| wrong("a byte"))?),
            Col::I16(b) => b.append_value(i16::try_from(int(v)?).map_err(|_| wrong("a short"))?),
            Col::I32(b) => b.append_value(i32::try_from(int(v)?).map_err(|_| wrong("an int"))?),
            Col::I64(b) => b.append_value(int(v)?),
            Col::F32(b) => b.append_value(v.as_f64().ok_or_else(|| wrong("a number"))? as f32),
            Col::F64(b) => b.append_value(v.as_f64().ok_or_else(|| wrong("a number"))?),
            Col::Str(b) => b.append_value(v.as_str().ok_or_else(|| wrong("a string"))?),
            Col::Bin(b) => b.append_value(bytes(v)?),
            Col::Ts(b, unit) => b.append_value(micros(int(v)?, *unit)?),
            Col::Date(b) => b.append_value(i32::try_from(int(v)?).map_err(|_| wrong("a date (days)"))?),
            Col::Dec(b, scale, precision) => {
                let n = match (v, text) {
                    (Value::String(_), Text::AvroDefault) => unscaled(&bytes(v)?)?,
                    (Value::String(s), Text::Payload) => parse_decimal(s, *scale).ok_or_else(|| wrong("a decimal"))?,
                    (Value::Number(n), _) => parse_decimal(&n.to_string(), *scale).ok_or_else(|| wrong("a decimal"))?,
                    _ => return Err(wrong("a decimal")),
                };
                b.append_value(decimal(n, *precision)?);
            }
            Col::Struct(c) => {
                let o = v.as_object().ok_or_else(|| wrong("an object"))?;
                for (j, col) in c.cols.iter_mut().enumerate() {
                    if let Some(x) = o.get(c.fields[j].name()) {
                        col.json(x, text)
                            .and_then(|null| not_null(null, c.fields[j].is_nullable()))
                            .map_err(|e| format!("{}: {e}", c.fields[j].name()))?;
                    }
                }
                c.complete_row()?;
            }
            Col::Members(m) => {
                let k = m.json_member(v)?;
                m.set_member(k, |c| c.json(v, text))?;
            }
            Col::List(c) => {
                let items = v.as_array().ok_or_else(|| wrong("an array"))?;
                for x in items {
                    not_null(c.item.json(x, text)?, c.field.is_nullable())?;
                }
                let end = c.offsets.last().copied().unwrap_or(0) as usize + items.len();
                c.offsets.push(offset(end)?);
                c.nulls.append_non_null();
            }
            Col::Map(c) => {
                let o = v.as_object().ok_or_else(|| wrong("an object"))?;
                for (k, x) in o {
                    c.keys.append_value(k);
                    not_null(c.values.json(x, text)?, c.nullable)?;
                }
                let end = c.offsets.last().copied().unwrap_or(0) as usize + o.len();
                c.offsets.push(offset(end)?);
                c.nulls.append_non_null();
            }
        }
        Ok(false)
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

/// How JSON writes bytes: a JSON payload (Jackson's base64), or an Avro field's default (the
/// specification's one code point per byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Text {
    Payload,
    AvroDefault,
}

/// `n` units of `unit` microseconds, refused rather than clamped when it overflows (as Spark's
/// exact multiplication throws).
pub(super) fn micros(n: i64, unit: i64) -> Result<i64, String> {
    n.checked_mul(unit)
        .ok_or_else(|| format!("{n} is out of range for a timestamp"))
}

/// A writer's `int` or `long` read wider: an `int` must be in the int range even then (the
/// varint of a long there is malformed data, not a wider value).
fn integer(node: &Node, d: &[u8], pos: &mut usize) -> Result<i64, String> {
    let n = get_long(d, pos)?;
    if matches!(node, Node::Int | Node::Date) && i32::try_from(n).is_err() {
        return Err(format!("{n} out of range for an int"));
    }
    Ok(n)
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

fn array4(b: &[u8]) -> [u8; 4] {
    let mut out = [0; 4];
    out.copy_from_slice(&b[..4]);
    out
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

/// An Avro datum being read: its bytes, the position, and how many more items of no bytes
/// (nulls, records of nothing) its arrays and maps may hold. Such an item costs a row however
/// few bytes say how many there are, so a count of 2^62 of them must be refused, not built.
pub(super) struct Input<'a> {
    pub(super) d: &'a [u8],
    pub(super) pos: usize,
    empty: usize,
}

/// Items of no bytes one payload may hold, in all its arrays and maps together.
pub(super) const MAX_EMPTY_ITEMS: usize = 1 << 20;

impl<'a> Input<'a> {
    pub(super) fn new(d: &'a [u8]) -> Input<'a> {
        Input {
            d,
            pos: 0,
            empty: MAX_EMPTY_ITEMS,
        }
    }
}

/// Reads the blocks of an Avro array or map, calling `item` once per item: how many there were.
fn blocks(r: &mut Input, mut item: impl FnMut(&mut Input) -> Result<(), String>) -> Result<usize, String> {
    let mut count = 0usize;
    loop {
        let n = get_long(r.d, &mut r.pos)?;
        if n == 0 {
            return Ok(count);
        }
        if n < 0 {
            get_long(r.d, &mut r.pos)?; // the block's size in bytes
        }
        let n = usize::try_from(n.unsigned_abs()).map_err(|_| "bad block count")?;
        for i in 0..n {
            let before = r.pos;
            item(r)?;
            // An item of no bytes says every item of its type has none: the rest of the block
            // must fit what is left of the allowance before any is built.
            if r.pos == before {
                let rest = n - i;
                if rest > r.empty {
                    return Err(format!(
                        "{n} items of no bytes: more than the {MAX_EMPTY_ITEMS} one payload may hold"
                    ));
                }
                r.empty -= rest;
                for _ in 1..rest {
                    item(r)?;
                }
                break;
            }
        }
        count += n;
    }
}
