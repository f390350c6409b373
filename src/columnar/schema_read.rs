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

use arrow_array::builder::{
    ArrayBuilder, BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder, Float64Builder,
    Int16Builder, Int32Builder, Int64Builder, Int8Builder, StringBuilder, TimestampMicrosecondBuilder,
};
use arrow_array::{ArrayRef, ListArray, MapArray, StructArray};
use arrow_buffer::{NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{ArrowError, DataType, Field, FieldRef, Fields, TimeUnit};
use serde_json::Value;

use crate::client::{Error, ErrorKind, Message, Result};
use crate::protocol::avro::{get_long, take, AvroSchema, Node, Record};
use crate::protocol::pb::schema::Type as Kind;

const UTC: &str = "UTC";
const MICROS_PER_DAY: i64 = 86_400_000_000;

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
                    .and_then(|v| root.json(&v)),
                _ => {
                    let w = self.writer_of(m).map_err(|e| undecodable(m, topic, &e))?;
                    let mut pos = 0;
                    root.avro(&w, &w.root, &m.payload, &mut pos).and_then(|()| {
                        if pos == m.payload.len() {
                            Ok(())
                        } else {
                            Err(format!(
                                "{} bytes left over after the Avro datum",
                                m.payload.len() - pos
                            ))
                        }
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
        ErrorKind::Other,
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

/// `[int, long]` and `[float, double]` read as their wider type, as Spark reads them.
fn widened(branches: &[&Node]) -> Option<DataType> {
    match branches {
        [Node::Int, Node::Long] | [Node::Long, Node::Int] => Some(DataType::Int64),
        [Node::Float, Node::Double] | [Node::Double, Node::Float] => Some(DataType::Float64),
        _ => None,
    }
}

fn map_type(values: DataType, nullable: bool) -> DataType {
    let entries = Fields::from(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("value", values, nullable),
    ]);
    DataType::Map(Arc::new(Field::new("entries", DataType::Struct(entries), false)), false)
}

/// A column being built: its Arrow builder and, for nested types, how the Avro type maps.
#[derive(Debug)]
enum Col {
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
struct StructCol {
    fields: Fields,
    cols: Vec<Col>,
    defaults: Vec<Option<Value>>,
    nulls: NullBufferBuilder,
    len: usize,
}

#[derive(Debug)]
struct ListCol {
    field: FieldRef,
    item: Col,
    offsets: Vec<i32>,
    nulls: NullBufferBuilder,
}

#[derive(Debug)]
struct MapCol {
    entries: FieldRef,
    keys: StringBuilder,
    values: Col,
    offsets: Vec<i32>,
    nulls: NullBufferBuilder,
}

fn offset(n: usize) -> std::result::Result<i32, String> {
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
    fn complete_row(&mut self) -> std::result::Result<(), String> {
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
    fn avro(&mut self, w: &AvroSchema, rec: &Record, d: &[u8], pos: &mut usize) -> std::result::Result<(), String> {
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
    fn new(s: &AvroSchema, node: &Node, t: &DataType) -> std::result::Result<Col, String> {
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
                            .collect::<std::result::Result<Vec<_>, String>>()?;
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

    fn of_type(t: &DataType) -> Option<Col> {
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

    fn null(&mut self) {
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
    fn avro(&mut self, w: &AvroSchema, node: &Node, d: &[u8], pos: &mut usize) -> std::result::Result<(), String> {
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
        let len = |d: &[u8], pos: &mut usize| -> std::result::Result<usize, String> {
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
                let mut count = c.offsets.last().copied().unwrap_or(0) as usize;
                loop {
                    let mut n = get_long(d, pos)?;
                    if n == 0 {
                        break;
                    }
                    if n < 0 {
                        n = n.checked_neg().ok_or("bad block count")?;
                        get_long(d, pos)?; // the block's size in bytes
                    }
                    for _ in 0..n {
                        c.item.avro(w, item, d, pos)?;
                    }
                    count += n as usize;
                }
                c.offsets.push(offset(count)?);
                c.nulls.append_non_null();
            }
            (Col::Map(c), Node::Map(values)) => {
                let mut count = c.offsets.last().copied().unwrap_or(0) as usize;
                loop {
                    let mut n = get_long(d, pos)?;
                    if n == 0 {
                        break;
                    }
                    if n < 0 {
                        n = n.checked_neg().ok_or("bad block count")?;
                        get_long(d, pos)?;
                    }
                    for _ in 0..n {
                        let k = len(d, pos)?;
                        c.keys.append_value(
                            std::str::from_utf8(take(d, pos, k)?).map_err(|_| "a map key that is not UTF-8")?,
                        );
                        c.values.avro(w, values, d, pos)?;
                    }
                    count += n as usize;
                }
                c.offsets.push(offset(count)?);
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
    fn json(&mut self, v: &Value) -> std::result::Result<(), String> {
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

    fn finish(self) -> std::result::Result<ArrayRef, ArrowError> {
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
                let cols = c
                    .cols
                    .into_iter()
                    .map(Col::finish)
                    .collect::<std::result::Result<Vec<_>, _>>()?;
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
fn unscaled(b: &[u8]) -> std::result::Result<i128, String> {
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
fn parse_decimal(text: &str, scale: u32) -> Option<i128> {
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
                    b.append_value(ms.saturating_mul(1000));
                }
                Col::Date(b) => {
                    // java.util.Date: milliseconds of the day's midnight UTC
                    let ms = i64::from_be_bytes(fixed(8)?.try_into().map_err(|_| "size")?);
                    let days = ms.saturating_mul(1000).div_euclid(MICROS_PER_DAY);
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
