//! Received messages into the columns of an Arrow schema chosen by the caller (the Spark
//! source's row schema, in either naming): each column is filled in one pass over the
//! messages, straight into Arrow buffers.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, StringBuilder};
use arrow_array::{
    make_array, ArrayRef, Int32Array, Int64Array, MapArray, RecordBatch, RecordBatchOptions, StructArray,
};
use arrow_buffer::{Buffer, NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_data::ArrayData;
use arrow_schema::{ArrowError, DataType, Field, SchemaRef, TimeUnit};
use prost::Message as _;

use super::schema_read::ValueSchema;
use crate::client::{Error, ErrorKind, Message, Result};

/// What a column of a read holds. Both namings of the Spark source map here: magnetar's
/// (`key`, `publish_time`, ...) and pulsar-spark's (`__key`, `__publishTime`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    /// The key as a string (`key`).
    Key,
    /// The key's UTF-8 bytes (`__key`, as the connector has it).
    KeyBytes,
    /// The payload.
    Value,
    /// The topic (a partitioned topic's own name, not its partition's).
    Topic,
    /// The partition's full name (`__topic`: the topic itself when not partitioned).
    PartitionName,
    /// The partition index (-1: not partitioned).
    Partition,
    /// The serialized message id (`MessageIdData`, as every client serializes it).
    MessageId,
    /// The publish time.
    PublishTime,
    /// The event time, null when the producer set none.
    EventTime,
    /// The properties, an empty map when there are none.
    Properties,
    /// The producer's name.
    ProducerName,
    /// The producer's sequence id.
    SequenceId,
    /// How often the broker delivered the message before.
    RedeliveryCount,
    /// Column `i` of the payload decoded with the topic's schema ([`ValueSchema`]).
    Decoded(usize),
}

/// Every column name a read knows, for error messages.
pub const COLUMN_NAMES: &[&str] = &[
    "key",
    "value",
    "topic",
    "partition",
    "message_id",
    "publish_time",
    "event_time",
    "properties",
    "producer_name",
    "sequence_id",
    "redelivery_count",
    "__key",
    "__topic",
    "__messageId",
    "__publishTime",
    "__eventTime",
    "__messageProperties",
];

impl Column {
    /// The column a name stands for.
    pub fn named(name: &str) -> Option<Column> {
        Some(match name {
            "key" => Column::Key,
            "__key" => Column::KeyBytes,
            "value" => Column::Value,
            "topic" => Column::Topic,
            "__topic" => Column::PartitionName,
            "partition" => Column::Partition,
            "message_id" | "__messageId" => Column::MessageId,
            "publish_time" | "__publishTime" => Column::PublishTime,
            "event_time" | "__eventTime" => Column::EventTime,
            "properties" | "__messageProperties" => Column::Properties,
            "producer_name" => Column::ProducerName,
            "sequence_id" => Column::SequenceId,
            "redelivery_count" => Column::RedeliveryCount,
            _ => return None,
        })
    }

    fn expected(self) -> &'static str {
        match self {
            Column::Key | Column::Topic | Column::PartitionName | Column::ProducerName => "string",
            Column::KeyBytes | Column::Value | Column::MessageId => "binary",
            Column::Partition | Column::RedeliveryCount => "int32",
            Column::SequenceId => "int64",
            Column::PublishTime | Column::EventTime => "a timestamp",
            Column::Properties => "map<string, string>",
            Column::Decoded(_) => "the schema's type",
        }
    }

    fn accepts(self, t: &DataType) -> bool {
        match self {
            Column::Key | Column::Topic | Column::PartitionName | Column::ProducerName => *t == DataType::Utf8,
            Column::KeyBytes | Column::Value | Column::MessageId => *t == DataType::Binary,
            Column::Partition | Column::RedeliveryCount => *t == DataType::Int32,
            Column::SequenceId => *t == DataType::Int64,
            Column::PublishTime | Column::EventTime => matches!(t, DataType::Timestamp(..)),
            Column::Properties => match t {
                DataType::Map(entries, _) => match entries.data_type() {
                    DataType::Struct(f) => {
                        f.len() == 2 && *f[0].data_type() == DataType::Utf8 && *f[1].data_type() == DataType::Utf8
                    }
                    _ => false,
                },
                _ => false,
            },
            Column::Decoded(_) => false,
        }
    }
}

fn arrow_error(e: ArrowError) -> Error {
    Error::new(ErrorKind::Other, format!("building Arrow columns: {e}"))
}

/// The columns to fill, checked once, and the values that are the same for every row of one
/// topic partition.
#[derive(Debug, Clone)]
pub struct Layout {
    schema: SchemaRef,
    columns: Vec<Column>,
    topic: String,
    partition: i32,
    partition_name: String,
    /// Whether the topic and partition columns come from each message (a consumer or reader
    /// of several partitions or topics) rather than from `topic` and `partition`.
    per_message: bool,
    /// The topic's schema, when the payload's columns are decoded with it.
    values: Option<Arc<ValueSchema>>,
    /// The Arrow type of each decoded column asked for, by its index in `values`.
    decoded: HashMap<usize, DataType>,
}

impl Layout {
    /// A layout for `schema` (field names from [`COLUMN_NAMES`], in any order and subset) of
    /// the messages of `topic`'s partition `partition` (-1: a non-partitioned topic).
    pub fn new(schema: SchemaRef, topic: &str, partition: i32) -> Result<Layout> {
        Layout::with_values(schema, topic, partition, None)
    }

    /// [`Layout::new`] where the payload is decoded with `values` (the topic's schema): its
    /// columns (by name) come before the metadata columns of the same name.
    pub fn with_values(
        schema: SchemaRef,
        topic: &str,
        partition: i32,
        values: Option<Arc<ValueSchema>>,
    ) -> Result<Layout> {
        let mut columns = Vec::with_capacity(schema.fields().len());
        let mut decoded = HashMap::new();
        for f in schema.fields() {
            if let Some((i, _)) = values.as_ref().and_then(|v| v.fields().find(f.name())) {
                let v = values.as_ref().expect("found in it");
                v.check_type(i, f.data_type())
                    .map_err(|e| Error::invalid(format!("column {:?}: {e}", f.name())))?;
                decoded.insert(i, f.data_type().clone());
                columns.push(Column::Decoded(i));
                continue;
            }
            let Some(c) = Column::named(f.name()) else {
                return Err(Error::invalid(format!(
                    "unknown column {:?} in the read schema (the columns are {})",
                    f.name(),
                    COLUMN_NAMES.join(", ")
                )));
            };
            if !c.accepts(f.data_type()) {
                return Err(Error::invalid(format!(
                    "column {:?} must be {}, not {}",
                    f.name(),
                    c.expected(),
                    f.data_type()
                )));
            }
            columns.push(c);
        }
        let partition_name = if partition < 0 {
            topic.to_string()
        } else {
            format!("{topic}-partition-{partition}")
        };
        Ok(Layout {
            schema,
            columns,
            topic: topic.to_string(),
            partition,
            partition_name,
            per_message: false,
            values,
            decoded,
        })
    }

    /// [`Layout::with_values`] for messages of any partitions and topics (a partitioned or
    /// multi-topic consumer's): each row's topic, partition name and partition index are its
    /// message's own. `topic` only names the read in errors.
    pub fn per_message(schema: SchemaRef, topic: &str, values: Option<Arc<ValueSchema>>) -> Result<Layout> {
        let mut layout = Layout::with_values(schema, topic, -1, values)?;
        layout.per_message = true;
        Ok(layout)
    }

    /// The schema of every batch built.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// The topic's schema the payloads are decoded with, if any.
    pub fn values(&self) -> Option<&Arc<ValueSchema>> {
        self.values.as_ref().filter(|_| !self.decoded.is_empty())
    }

    /// One record batch of `msgs`, in order.
    pub fn build(&self, msgs: &[&Message]) -> Result<RecordBatch> {
        let n = msgs.len();
        let decoded = match &self.values {
            Some(v) if !self.decoded.is_empty() => v.decode(msgs, &self.decoded, &self.topic)?,
            _ => Vec::new(),
        };
        let mut arrays = Vec::with_capacity(self.columns.len());
        for (c, f) in self.columns.iter().zip(self.schema.fields()) {
            arrays.push(match c {
                Column::Decoded(i) => decoded[*i].clone(),
                _ => self.column(*c, f, msgs)?,
            });
        }
        let opts = RecordBatchOptions::new().with_row_count(Some(n));
        RecordBatch::try_new_with_options(self.schema.clone(), arrays, &opts).map_err(arrow_error)
    }

    fn column(&self, c: Column, f: &Field, msgs: &[&Message]) -> Result<ArrayRef> {
        let n = msgs.len();
        Ok(match c {
            Column::Key => strings(msgs, |m| m.key()),
            Column::KeyBytes => binaries(msgs, |m| m.key().map(str::as_bytes)),
            Column::Value => binaries(msgs, |m| Some(&m.payload[..])),
            Column::Topic if self.per_message => strings(msgs, |m| Some(base_topic(&m.topic))),
            Column::PartitionName if self.per_message => strings(msgs, |m| Some(&m.topic[..])),
            Column::Partition if self.per_message => {
                Arc::new(Int32Array::from_iter_values(msgs.iter().map(|m| m.id.partition)))
            }
            Column::Topic => repeated(n, &self.topic),
            Column::PartitionName => repeated(n, &self.partition_name),
            Column::Partition => Arc::new(Int32Array::from(vec![self.partition; n])),
            Column::MessageId => message_ids(msgs)?,
            Column::PublishTime => times(msgs, f.data_type(), |m| Some(m.publish_time()))?,
            Column::EventTime => times(msgs, f.data_type(), Message::event_time)?,
            Column::Properties => properties(msgs, f.data_type())?,
            Column::ProducerName => strings(msgs, |m| Some(m.producer_name())),
            Column::SequenceId => Arc::new(Int64Array::from_iter_values(
                msgs.iter().map(|m| m.sequence_id() as i64),
            )),
            Column::RedeliveryCount => Arc::new(Int32Array::from_iter_values(
                msgs.iter()
                    .map(|m| i32::try_from(m.redelivery_count).unwrap_or(i32::MAX)),
            )),
            Column::Decoded(_) => return Err(Error::invalid("a decoded column without the topic's schema")),
        })
    }
}

fn strings<'m>(msgs: &[&'m Message], get: impl Fn(&'m Message) -> Option<&'m str>) -> ArrayRef {
    let bytes = msgs.iter().map(|m| get(m).map_or(0, str::len)).sum();
    let mut b = StringBuilder::with_capacity(msgs.len(), bytes);
    for m in msgs {
        b.append_option(get(m));
    }
    Arc::new(b.finish())
}

fn binaries<'m>(msgs: &[&'m Message], get: impl Fn(&'m Message) -> Option<&'m [u8]>) -> ArrayRef {
    let bytes = msgs.iter().map(|m| get(m).map_or(0, <[u8]>::len)).sum();
    let mut b = BinaryBuilder::with_capacity(msgs.len(), bytes);
    for m in msgs {
        b.append_option(get(m));
    }
    Arc::new(b.finish())
}

/// A partition's topic (`t` of `t-partition-3`), or the topic itself.
fn base_topic(name: &str) -> &str {
    match name.rfind("-partition-") {
        Some(i) if name[i + "-partition-".len()..].parse::<u32>().is_ok() => &name[..i],
        _ => name,
    }
}

fn repeated(n: usize, s: &str) -> ArrayRef {
    let mut b = StringBuilder::with_capacity(n, n * s.len());
    for _ in 0..n {
        b.append_value(s);
    }
    Arc::new(b.finish())
}

fn message_ids(msgs: &[&Message]) -> Result<ArrayRef> {
    let mut b = BinaryBuilder::with_capacity(msgs.len(), msgs.len() * 16);
    let mut buf = Vec::with_capacity(64);
    for m in msgs {
        buf.clear();
        m.id.to_data()
            .encode(&mut buf)
            .map_err(|e| Error::new(ErrorKind::Other, format!("encoding a message id: {e}")))?;
        b.append_value(&buf);
    }
    Ok(Arc::new(b.finish()))
}

/// Milliseconds since the epoch in the unit of the column's timestamp type (time zone kept).
fn times(msgs: &[&Message], t: &DataType, get: impl Fn(&Message) -> Option<u64>) -> Result<ArrayRef> {
    let DataType::Timestamp(unit, _) = t else {
        return Err(Error::invalid(format!("expected a timestamp type, not {t}")));
    };
    let convert = |ms: u64| -> i64 {
        let ms = i64::try_from(ms).unwrap_or(i64::MAX);
        match unit {
            TimeUnit::Second => ms / 1000,
            TimeUnit::Millisecond => ms,
            TimeUnit::Microsecond => ms.saturating_mul(1000),
            TimeUnit::Nanosecond => ms.saturating_mul(1_000_000),
        }
    };
    let n = msgs.len();
    let mut values = Vec::with_capacity(n);
    let mut nulls = NullBufferBuilder::new(n);
    for m in msgs {
        match get(m) {
            Some(ms) => {
                values.push(convert(ms));
                nulls.append_non_null();
            }
            None => {
                values.push(0);
                nulls.append_null();
            }
        }
    }
    let data = ArrayData::builder(t.clone())
        .len(n)
        .add_buffer(Buffer::from_vec(values))
        .nulls(nulls.finish())
        .build()
        .map_err(arrow_error)?;
    Ok(make_array(data))
}

/// A map per message, with the entry, key and value fields (names, nullability) of `t`.
fn properties(msgs: &[&Message], t: &DataType) -> Result<ArrayRef> {
    let DataType::Map(entries, sorted) = t else {
        return Err(Error::invalid(format!("expected a map type, not {t}")));
    };
    let DataType::Struct(fields) = entries.data_type() else {
        return Err(Error::invalid(format!(
            "expected map entries of a struct type, not {t}"
        )));
    };
    let mut offsets: Vec<i32> = Vec::with_capacity(msgs.len() + 1);
    offsets.push(0);
    let mut keys = StringBuilder::new();
    let mut values = StringBuilder::new();
    let mut count: usize = 0;
    for m in msgs {
        for (k, v) in m.properties() {
            keys.append_value(k);
            values.append_value(v);
            count += 1;
        }
        let end = i32::try_from(count).map_err(|_| Error::invalid("too many properties for one Arrow map column"))?;
        offsets.push(end);
    }
    let entries_array = StructArray::try_new(
        fields.clone(),
        vec![Arc::new(keys.finish()), Arc::new(values.finish())],
        None,
    )
    .map_err(arrow_error)?;
    let map = MapArray::try_new(
        entries.clone(),
        OffsetBuffer::new(ScalarBuffer::from(offsets)),
        entries_array,
        None,
        *sorted,
    )
    .map_err(arrow_error)?;
    Ok(Arc::new(map))
}

#[cfg(test)]
#[path = "read_tests.rs"]
pub(crate) mod tests;
