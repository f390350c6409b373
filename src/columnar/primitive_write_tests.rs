use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::{
    BooleanArray, Date32Array, Float32Array, Float64Array, Int16Array, Int32Array, Int64Array, Int8Array, RecordBatch,
    StringArray, Time64MicrosecondArray, TimestampMicrosecondArray,
};
use arrow_schema::{Field, Schema};

use super::*;
use crate::client::Message;
use crate::columnar::read::tests::message;
use crate::columnar::schema_read::ValueSchema;
use crate::columnar::schema_write::ValueEncoder;
use crate::protocol::pb::MessageMetadata;

fn payloads(kind: Kind, col: ArrayRef) -> Vec<Option<Vec<u8>>> {
    messages(kind, &col)
        .unwrap()
        .into_iter()
        .map(|m| (!m.null_value).then(|| m.payload.to_vec()))
        .collect()
}

/// The column a read gives for `msgs` (written with `kind`).
fn read_back(kind: Kind, msgs: Vec<OutgoingMessage>) -> ArrayRef {
    let v = ValueSchema::new(kind as i32, b"", &[]).unwrap().unwrap();
    let got: Vec<Message> = msgs
        .into_iter()
        .map(|o| {
            let mut m = message(1, None, &[], None);
            m.payload = o.payload;
            m.metadata = Arc::new(MessageMetadata {
                null_value: o.null_value.then_some(true),
                ..(*m.metadata).clone()
            });
            m
        })
        .collect();
    let refs: Vec<&Message> = got.iter().collect();
    v.decode(&refs, &HashMap::new(), "t").unwrap().remove(0)
}

#[test]
fn each_kind_has_the_java_clients_bytes() {
    let be = |v: i64| Some(v.to_be_bytes().to_vec());
    assert_eq!(
        payloads(Kind::String, Arc::new(StringArray::from(vec!["hé", ""]))),
        [Some("hé".as_bytes().to_vec()), Some(vec![])]
    );
    assert_eq!(
        payloads(Kind::Bool, Arc::new(BooleanArray::from(vec![true, false]))),
        [Some(vec![1]), Some(vec![0])]
    );
    assert_eq!(
        payloads(Kind::Int8, Arc::new(Int8Array::from(vec![-2]))),
        [Some(vec![0xfe])]
    );
    assert_eq!(
        payloads(Kind::Int16, Arc::new(Int16Array::from(vec![0x0102]))),
        [Some(vec![1, 2])]
    );
    assert_eq!(
        payloads(Kind::Int32, Arc::new(Int32Array::from(vec![-1]))),
        [Some(vec![0xff; 4])]
    );
    assert_eq!(payloads(Kind::Int64, Arc::new(Int64Array::from(vec![-42]))), [be(-42)]);
    assert_eq!(
        payloads(Kind::Float, Arc::new(Float32Array::from(vec![1.5]))),
        [Some(vec![0x3f, 0xc0, 0, 0])]
    );
    assert_eq!(
        payloads(Kind::Double, Arc::new(Float64Array::from(vec![1.5]))),
        [Some(1.5f64.to_be_bytes().to_vec())]
    );
    // java.util.Date of the day's midnight UTC; java.sql.Timestamp in milliseconds.
    assert_eq!(
        payloads(Kind::Date, Arc::new(Date32Array::from(vec![2, -1]))),
        [be(172_800_000), be(-86_400_000)]
    );
    let ts = TimestampMicrosecondArray::from(vec![1_500_999, -1]).with_timezone("UTC");
    assert_eq!(payloads(Kind::Timestamp, Arc::new(ts)), [be(1500), be(-1)]);
    // java.sql.Time: milliseconds since midnight.
    assert_eq!(
        payloads(Kind::Time, Arc::new(Time64MicrosecondArray::from(vec![3_600_000_000]))),
        [be(3_600_000)]
    );
}

#[test]
fn nulls_are_null_values_and_read_back_as_nulls() {
    let col: ArrayRef = Arc::new(Int64Array::from(vec![Some(7), None, Some(-9)]));
    let msgs = messages(Kind::Int64, &col).unwrap();
    assert!(msgs[1].null_value && msgs[1].payload.is_empty());
    assert!(!msgs[0].null_value && !msgs[2].null_value);
    let back = read_back(Kind::Int64, msgs);
    assert_eq!(back.as_primitive::<Int64Type>().value(2), -9);
    assert!(back.is_null(1));
}

#[test]
fn what_a_read_gives_writes_back_unchanged() {
    let cols: Vec<(Kind, ArrayRef)> = vec![
        (
            Kind::String,
            Arc::new(StringArray::from(vec![Some("a"), None, Some("ü")])),
        ),
        (
            Kind::Bool,
            Arc::new(BooleanArray::from(vec![Some(true), None, Some(false)])),
        ),
        (
            Kind::Int8,
            Arc::new(Int8Array::from(vec![Some(i8::MIN), None, Some(3)])),
        ),
        (
            Kind::Int16,
            Arc::new(Int16Array::from(vec![Some(i16::MAX), None, Some(-3)])),
        ),
        (
            Kind::Int32,
            Arc::new(Int32Array::from(vec![Some(i32::MIN), None, Some(3)])),
        ),
        (
            Kind::Int64,
            Arc::new(Int64Array::from(vec![Some(i64::MAX), None, Some(-3)])),
        ),
        (
            Kind::Float,
            Arc::new(Float32Array::from(vec![Some(0.25), None, Some(-1e30)])),
        ),
        (
            Kind::Double,
            Arc::new(Float64Array::from(vec![Some(1e300), None, Some(-0.5)])),
        ),
        (
            Kind::Date,
            Arc::new(Date32Array::from(vec![Some(19_000), None, Some(-3)])),
        ),
        (
            Kind::Timestamp,
            Arc::new(
                TimestampMicrosecondArray::from(vec![Some(1_700_000_000_123_000), None, Some(-5_000)])
                    .with_timezone("UTC"),
            ),
        ),
    ];
    for (kind, col) in cols {
        let back = read_back(kind, messages(kind, &col).unwrap());
        assert_eq!(back.as_ref(), col.as_ref(), "{kind:?}");
    }
}

#[test]
fn a_value_of_another_type_is_refused_naming_the_schema() {
    let col: ArrayRef = Arc::new(StringArray::from(vec!["1"]));
    let err = messages(Kind::Int64, &col).unwrap_err();
    assert!(
        err.message().contains("must be int64 for the topic's INT64 schema"),
        "{}",
        err.message()
    );
    let col: ArrayRef = Arc::new(Int32Array::from(vec![1]));
    assert!(
        messages(Kind::Int64, &col).is_err(),
        "no widening: the type is the one a read gives"
    );
}

#[test]
fn the_encoder_takes_the_value_column_of_a_batch() {
    let enc = ValueEncoder::new(Kind::Double as i32, b"").unwrap().unwrap();
    let schema = Schema::new(vec![
        Field::new("key", DataType::Utf8, true),
        Field::new("value", DataType::Float64, true),
    ]);
    let batch = RecordBatch::try_new(
        Arc::new(schema),
        vec![
            Arc::new(StringArray::from(vec!["k"])),
            Arc::new(Float64Array::from(vec![2.0])),
        ],
    )
    .unwrap();
    let msgs = enc.messages(&batch).unwrap();
    assert_eq!(msgs[0].payload.as_ref(), 2.0f64.to_be_bytes());
    let err = enc.messages(&batch.project(&[0]).unwrap()).unwrap_err();
    assert!(err.message().contains("needs a 'value' column"), "{}", err.message());
}
