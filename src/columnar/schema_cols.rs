//! The column builders of [`super::schema_read`]: an Arrow builder per column of the type the
//! caller asks for, filled from Avro binary (with the writer's type, resolved to the reader's)
//! or from JSON (with the reader's type). Nested types nest builders; a row a record does not
//! set is completed with the field's default or null.

use std::sync::Arc;

use arrow_array::builder::{
    ArrayBuilder, BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder, Float64Builder,
    Int16Builder, Int32Builder, Int64Builder, Int8Builder, StringBuilder, TimestampMicrosecondBuilder,
};
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
    /// With the scale.
    Dec(Decimal128Builder, u32),
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
            nulls: NullBufferBuilder::new(0),
            len: 0,
        }
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
                        .json(v)
                        .map_err(|e| format!("the default of {}: {e}", self.fields[j].name()))?,
                    None => c.null(),
                }
            }
        }
        self.nulls.append_non_null();
        self.len += 1;
        Ok(())
    }

    /// A writer's record, resolved to these fields by name.
    fn avro(&mut self, w: &AvroSchema, rec: &Record, d: &[u8], pos: &mut usize) -> Result<(), String> {
        for (i, f) in rec.fields.iter().enumerate() {
            let at = match self.fields.get(i) {
                Some(x) if *x.name() == f.name => Some(i),
                _ => self.fields.iter().position(|x| *x.name() == f.name),
            };
            match at {
                Some(j) => self.cols[j]
                    .avro(w, &f.node, d, pos)
                    .map_err(|e| format!("{}: {e}", f.name))?,
                None => w.skip(&f.node, d, pos).map_err(|e| format!("{}: {e}", f.name))?,
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
                        Col::Members(Box::new(StructCol::new(f.clone(), cols, vec![None; many.len()])))
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
            Col::Dec(b, _) => b.len(),
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
            Col::Dec(b, _) => b.append_null(),
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

    /// One Avro binary datum of the writer's type `node` (schema `w`) at `*pos`.
    pub(super) fn avro(&mut self, w: &AvroSchema, node: &Node, d: &[u8], pos: &mut usize) -> Result<(), String> {
        if let Node::Union(branches) = node {
            let i = get_long(d, pos)?;
            let branch = usize::try_from(i)
                .ok()
                .and_then(|i| branches.get(i))
                .ok_or_else(|| format!("union index {i} out of range"))?;
            if *branch == Node::Null {
                self.null();
                return Ok(());
            }
            if let Col::Members(m) = self {
                let k = branches[..i as usize].iter().filter(|b| **b != Node::Null).count();
                if k >= m.cols.len() {
                    return Err(format!("union branch {i} has no member in the reader's union"));
                }
                for (j, c) in m.cols.iter_mut().enumerate() {
                    if j == k {
                        c.avro(w, branch, d, pos)?;
                    } else {
                        c.null();
                    }
                }
                m.nulls.append_non_null();
                m.len += 1;
                return Ok(());
            }
            return self.avro(w, branch, d, pos);
        }
        let len = |d: &[u8], pos: &mut usize| -> Result<usize, String> {
            usize::try_from(get_long(d, pos)?).map_err(|_| "negative length".to_string())
        };
        match (&mut *self, node) {
            (_, Node::Null) => self.null(),
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
                b.append_value(get_long(d, pos)?)
            }
            (Col::Ts(b, _), Node::TimestampMillis) => b.append_value(get_long(d, pos)?.saturating_mul(1000)),
            (Col::Ts(b, _), Node::TimestampMicros | Node::Long) => b.append_value(get_long(d, pos)?),
            (Col::F32(b), Node::Int | Node::Long) => b.append_value(get_long(d, pos)? as f32),
            (Col::F32(b), Node::Float) => b.append_value(f32::from_le_bytes(array4(take(d, pos, 4)?))),
            (Col::F64(b), Node::Int | Node::Long) => b.append_value(get_long(d, pos)? as f64),
            (Col::F64(b), Node::Float) => b.append_value(f64::from(f32::from_le_bytes(array4(take(d, pos, 4)?)))),
            (Col::F64(b), Node::Double) => {
                let bytes: [u8; 8] = take(d, pos, 8)?.try_into().map_err(|_| "truncated double")?;
                b.append_value(f64::from_le_bytes(bytes));
            }
            (Col::Str(b), Node::String | Node::Bytes) => {
                let n = len(d, pos)?;
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
                let n = len(d, pos)?;
                b.append_value(take(d, pos, n)?);
            }
            (Col::Bin(b), Node::Fixed(n) | Node::Decimal { fixed: Some(n), .. }) => b.append_value(take(d, pos, *n)?),
            (Col::Dec(b, scale), Node::Decimal { scale: ws, fixed, .. }) => {
                if ws != scale {
                    return Err(format!("a decimal of scale {ws} read as scale {scale}"));
                }
                let n = match fixed {
                    Some(n) => *n,
                    None => len(d, pos)?,
                };
                b.append_value(unscaled(take(d, pos, n)?)?);
            }
            (Col::Struct(c), Node::Record(i)) => c.avro(w, &w.records[*i], d, pos)?,
            (Col::List(c), Node::Array(item)) => {
                let start = c.offsets.last().copied().unwrap_or(0) as usize;
                let n = blocks(d, pos, |d, pos| c.item.avro(w, item, d, pos))?;
                c.offsets.push(offset(start + n)?);
                c.nulls.append_non_null();
            }
            (Col::Map(c), Node::Map(values)) => {
                let start = c.offsets.last().copied().unwrap_or(0) as usize;
                let n = blocks(d, pos, |d, pos| {
                    let k = len(d, pos)?;
                    c.keys.append_value(
                        std::str::from_utf8(take(d, pos, k)?).map_err(|_| "a map key that is not UTF-8")?,
                    );
                    c.values.avro(w, values, d, pos)
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
        Ok(())
    }

    /// One JSON value, read as the reader's type (fields by name, bytes in base64).
    pub(super) fn json(&mut self, v: &Value) -> Result<(), String> {
        if v.is_null() {
            self.null();
            return Ok(());
        }
        let wrong = |what: &str| format!("{v} is not {what}");
        let int = |v: &Value| v.as_i64().ok_or_else(|| wrong("an integer"));
        match self {
            Col::Bool(b) => b.append_value(v.as_bool().ok_or_else(|| wrong("a boolean"))?),
            Col::I8(b) => b.append_value(i8::try_from(int(v)?).map_err(|_| wrong("a byte"))?),
            Col::I16(b) => b.append_value(i16::try_from(int(v)?).map_err(|_| wrong("a short"))?),
            Col::I32(b) => b.append_value(i32::try_from(int(v)?).map_err(|_| wrong("an int"))?),
            Col::I64(b) => b.append_value(int(v)?),
            Col::F32(b) => b.append_value(v.as_f64().ok_or_else(|| wrong("a number"))? as f32),
            Col::F64(b) => b.append_value(v.as_f64().ok_or_else(|| wrong("a number"))?),
            Col::Str(b) => b.append_value(v.as_str().ok_or_else(|| wrong("a string"))?),
            Col::Bin(b) => {
                use base64::Engine as _;
                let s = v.as_str().ok_or_else(|| wrong("a base64 string"))?;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(s)
                    .map_err(|_| wrong("base64"))?;
                b.append_value(bytes);
            }
            Col::Ts(b, unit) => b.append_value(int(v)?.saturating_mul(*unit)),
            Col::Date(b) => b.append_value(i32::try_from(int(v)?).map_err(|_| wrong("a date (days)"))?),
            Col::Dec(b, scale) => {
                let text = match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    _ => return Err(wrong("a decimal")),
                };
                b.append_value(parse_decimal(&text, *scale).ok_or_else(|| wrong("a decimal"))?);
            }
            Col::Struct(c) => {
                let o = v.as_object().ok_or_else(|| wrong("an object"))?;
                for (j, col) in c.cols.iter_mut().enumerate() {
                    if let Some(x) = o.get(c.fields[j].name()) {
                        col.json(x).map_err(|e| format!("{}: {e}", c.fields[j].name()))?;
                    }
                }
                c.complete_row()?;
            }
            Col::Members(_) => return Err("JSON of a union of several types is not read".into()),
            Col::List(c) => {
                let items = v.as_array().ok_or_else(|| wrong("an array"))?;
                for x in items {
                    c.item.json(x)?;
                }
                let end = c.offsets.last().copied().unwrap_or(0) as usize + items.len();
                c.offsets.push(offset(end)?);
                c.nulls.append_non_null();
            }
            Col::Map(c) => {
                let o = v.as_object().ok_or_else(|| wrong("an object"))?;
                for (k, x) in o {
                    c.keys.append_value(k);
                    c.values.json(x)?;
                }
                let end = c.offsets.last().copied().unwrap_or(0) as usize + o.len();
                c.offsets.push(offset(end)?);
                c.nulls.append_non_null();
            }
        }
        Ok(())
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
            Col::Dec(mut b, _) => Arc::new(b.finish()),
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

/// Reads the blocks of an Avro array or map, calling `item` once per item: how many there were.
fn blocks(
    d: &[u8],
    pos: &mut usize,
    mut item: impl FnMut(&[u8], &mut usize) -> Result<(), String>,
) -> Result<usize, String> {
    let mut count = 0usize;
    loop {
        let mut n = get_long(d, pos)?;
        if n == 0 {
            return Ok(count);
        }
        if n < 0 {
            n = n.checked_neg().ok_or("bad block count")?;
            get_long(d, pos)?; // the block's size in bytes
        }
        for _ in 0..n {
            item(d, pos)?;
        }
        count += n as usize;
    }
}
