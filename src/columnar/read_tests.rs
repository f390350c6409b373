use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type, TimestampMicrosecondType};
use arrow_array::Array;
use arrow_schema::{DataType, Field, Fields, Schema, TimeUnit};
use bytes::Bytes;

use super::*;
use crate::client::MessageId;
use crate::protocol::pb::{KeyValue, MessageMetadata};

pub(crate) fn message(entry: i64, key: Option<&str>, props: &[(&str, &str)], event_time: Option<u64>) -> Message {
    let meta = MessageMetadata {
        producer_name: "prod".into(),
        sequence_id: 7 + entry as u64,
        publish_time: 1_700_000_000_123,
        partition_key: key.map(str::to_string),
        event_time,
        properties: props
            .iter()
            .map(|(k, v)| KeyValue {
                key: k.to_string(),
                value: v.to_string(),
            })
            .collect(),
        ..Default::default()
    };
    Message {
        redelivery_count: 2,
        ..Message::delivered(
            Arc::from("persistent://public/default/t-partition-1"),
            MessageId::new(5, entry, 1, -1),
            Bytes::from(format!("v{entry}")),
            meta,
        )
    }
}

fn utc_us() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

fn props_type() -> DataType {
    let entries = Fields::from(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("value", DataType::Utf8, true),
    ]);
    DataType::Map(Arc::new(Field::new("entries", DataType::Struct(entries), false)), false)
}

fn magnetar_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Utf8, true),
        Field::new("value", DataType::Binary, true),
        Field::new("topic", DataType::Utf8, true),
        Field::new("partition", DataType::Int32, true),
        Field::new("message_id", DataType::Binary, true),
        Field::new("publish_time", utc_us(), true),
        Field::new("event_time", utc_us(), true),
        Field::new("properties", props_type(), true),
        Field::new("producer_name", DataType::Utf8, true),
        Field::new("sequence_id", DataType::Int64, true),
        Field::new("redelivery_count", DataType::Int32, true),
    ]))
}

#[test]
fn every_column_of_the_magnetar_schema_is_filled() {
    let layout = Layout::new(magnetar_schema(), "persistent://public/default/t", 1).unwrap();
    let a = message(0, Some("k"), &[("a", "1"), ("b", "2")], Some(1_600_000_000_000));
    let b = message(1, None, &[], None);
    let batch = layout.build(&[&a, &b]).unwrap();
    assert_eq!(batch.num_rows(), 2);
    assert_eq!(batch.schema(), magnetar_schema());
    let keys = batch.column(0).as_string::<i32>();
    assert_eq!((keys.value(0), keys.is_null(1)), ("k", true));
    let values = batch.column(1).as_binary::<i32>();
    assert_eq!((values.value(0), values.value(1)), (&b"v0"[..], &b"v1"[..]));
    assert_eq!(
        batch.column(2).as_string::<i32>().value(1),
        "persistent://public/default/t"
    );
    assert_eq!(
        batch.column(3).as_primitive::<Int32Type>().values().to_vec(),
        vec![1, 1]
    );
    let ids = batch.column(4).as_binary::<i32>();
    assert_eq!(MessageId::deserialize(ids.value(1)).unwrap(), b.id);
    let publish = batch.column(5).as_primitive::<TimestampMicrosecondType>();
    assert_eq!(publish.value(0), 1_700_000_000_123_000);
    let event = batch.column(6).as_primitive::<TimestampMicrosecondType>();
    assert_eq!((event.value(0), event.is_null(1)), (1_600_000_000_000_000, true));
    let props = batch.column(7).as_map();
    assert_eq!(
        (props.value_length(0), props.value_length(1), props.is_null(1)),
        (2, 0, false)
    );
    assert_eq!(props.keys().as_string::<i32>().value(1), "b");
    assert_eq!(props.values().as_string::<i32>().value(1), "2");
    assert_eq!(batch.column(8).as_string::<i32>().value(0), "prod");
    assert_eq!(batch.column(9).as_primitive::<Int64Type>().value(1), 8);
    assert_eq!(batch.column(10).as_primitive::<Int32Type>().value(0), 2);
}

#[test]
fn connector_names_give_binary_keys_and_the_partition_name() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("value", DataType::Binary, true),
        Field::new("__key", DataType::Binary, true),
        Field::new("__topic", DataType::Utf8, true),
        Field::new("__eventTime", DataType::Timestamp(TimeUnit::Millisecond, None), true),
    ]));
    let layout = Layout::new(schema, "persistent://public/default/t", 3).unwrap();
    let a = message(0, Some("k"), &[], Some(42));
    let batch = layout.build(&[&a]).unwrap();
    assert_eq!(batch.column(1).as_binary::<i32>().value(0), b"k");
    assert_eq!(
        batch.column(2).as_string::<i32>().value(0),
        "persistent://public/default/t-partition-3"
    );
    assert_eq!(
        batch
            .column(3)
            .as_primitive::<arrow_array::types::TimestampMillisecondType>()
            .value(0),
        42
    );
    let unpartitioned = Layout::new(batch.schema(), "persistent://public/default/u", -1).unwrap();
    let batch = unpartitioned.build(&[&a]).unwrap();
    assert_eq!(
        batch.column(2).as_string::<i32>().value(0),
        "persistent://public/default/u"
    );
}

#[test]
fn an_empty_batch_has_the_schema_and_no_rows() {
    let layout = Layout::new(magnetar_schema(), "t", -1).unwrap();
    let batch = layout.build(&[]).unwrap();
    assert_eq!((batch.num_rows(), batch.num_columns()), (0, 11));
}

#[test]
fn unknown_columns_and_wrong_types_are_refused() {
    let unknown = Arc::new(Schema::new(vec![Field::new("vaule", DataType::Binary, true)]));
    let e = Layout::new(unknown, "t", 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidConfiguration);
    assert!(e.message().contains("unknown column \"vaule\""), "{e}");
    let wrong = Arc::new(Schema::new(vec![Field::new("partition", DataType::Int64, true)]));
    let e = Layout::new(wrong, "t", 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidConfiguration);
    assert!(e.message().contains("must be int32, not Int64"), "{e}");
    let map = DataType::Map(
        Arc::new(Field::new(
            "entries",
            DataType::Struct(Fields::from(vec![
                Field::new("key", DataType::Utf8, false),
                Field::new("value", DataType::Int32, true),
            ])),
            false,
        )),
        false,
    );
    let e = Layout::new(Arc::new(Schema::new(vec![Field::new("properties", map, true)])), "t", 0).unwrap_err();
    assert!(e.message().contains("map<string, string>"), "{e}");
}

#[test]
fn a_non_nullable_field_refuses_a_null() {
    let schema = Arc::new(Schema::new(vec![Field::new("key", DataType::Utf8, false)]));
    let layout = Layout::new(schema, "t", 0).unwrap();
    assert!(layout.build(&[&message(0, None, &[], None)]).is_err());
}

#[test]
fn a_per_message_layout_takes_each_rows_topic_and_partition_from_its_message() {
    let schema = Arc::new(Schema::new(vec![
        Field::new("topic", DataType::Utf8, true),
        Field::new("partition", DataType::Int32, true),
        Field::new("__topic", DataType::Utf8, true),
    ]));
    let layout = Layout::per_message(schema, "persistent://public/default/p", None).unwrap();
    let mut a = message(0, None, &[], None);
    a.topic = Arc::from("persistent://public/default/p-partition-2");
    a.id.partition = 2;
    let mut b = message(1, None, &[], None);
    b.topic = Arc::from("persistent://public/default/plain");
    b.id.partition = -1;
    let batch = layout.build(&[&a, &b]).unwrap();
    let topics = batch.column(0).as_string::<i32>();
    assert_eq!(
        (topics.value(0), topics.value(1)),
        ("persistent://public/default/p", "persistent://public/default/plain")
    );
    assert_eq!(
        batch.column(1).as_primitive::<Int32Type>().values().to_vec(),
        vec![2, -1]
    );
    assert_eq!(
        batch.column(2).as_string::<i32>().value(0),
        "persistent://public/default/p-partition-2"
    );
}
