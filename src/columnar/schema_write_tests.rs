use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, TimestampMicrosecondType};
use arrow_array::{Array, Int32Array, Int64Array, RecordBatch, StringArray, StructArray, TimestampMillisecondArray};
use arrow_schema::{Field, Fields, Schema};

use super::*;
use crate::client::Message;
use crate::columnar::read::tests::message;
use crate::columnar::schema_read::ValueSchema;

const R: &str = r#"{"type":"record","name":"R","fields":[
    {"name":"id","type":"long"},
    {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
    {"name":"line","type":{"type":"record","name":"L","fields":[{"name":"sku","type":"string"},{"name":"qty","type":"int"}]}},
    {"name":"kind","type":{"type":"enum","name":"K","symbols":["A","B"]}},
    {"name":"note","type":["null","string"],"default":null},
    {"name":"n","type":"long","default":5}]}"#;

fn batch() -> RecordBatch {
    let line = StructArray::from(vec![
        (
            Arc::new(Field::new("sku", DataType::Utf8, true)),
            Arc::new(StringArray::from(vec!["a", "b"])) as ArrayRef,
        ),
        (
            Arc::new(Field::new("qty", DataType::Int32, true)),
            Arc::new(Int32Array::from(vec![1, 2])) as ArrayRef,
        ),
    ]);
    let schema = Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new("at", DataType::Timestamp(TimeUnit::Millisecond, None), true),
        Field::new("line", line.data_type().clone(), true),
        Field::new("kind", DataType::Utf8, true),
        Field::new("note", DataType::Utf8, true),
    ]);
    RecordBatch::try_new(
        Arc::new(schema),
        vec![
            Arc::new(Int64Array::from(vec![1, 2])),
            Arc::new(TimestampMillisecondArray::from(vec![1500, 2500])),
            Arc::new(line),
            Arc::new(StringArray::from(vec!["A", "B"])),
            Arc::new(StringArray::from(vec![Some("x"), None])),
        ],
    )
    .unwrap()
}

fn read_back(kind: Kind, payloads: Vec<Bytes>) -> Vec<ArrayRef> {
    let v = ValueSchema::new(kind as i32, R.as_bytes(), &[]).unwrap().unwrap();
    let msgs: Vec<Message> = payloads
        .into_iter()
        .map(|p| {
            let mut m = message(1, None, &[], None);
            m.payload = p;
            m
        })
        .collect();
    let refs: Vec<&Message> = msgs.iter().collect();
    v.decode(&refs, &HashMap::new(), "t").unwrap()
}

#[test]
fn rows_encode_to_what_a_read_decodes_in_both_encodings() {
    for kind in [Kind::Avro, Kind::Json] {
        let enc = ValueEncoder::new(kind as i32, R.as_bytes()).unwrap().unwrap();
        let cols = read_back(kind, enc.payloads(&batch()).unwrap());
        assert_eq!(cols[0].as_primitive::<Int64Type>().values(), &[1, 2]);
        assert_eq!(cols[1].as_primitive::<TimestampMicrosecondType>().value(1), 2_500_000);
        assert_eq!(cols[2].as_struct().column(0).as_string::<i32>().value(1), "b");
        assert_eq!(cols[3].as_string::<i32>().value(1), "B");
        assert_eq!(cols[4].as_string::<i32>().value(0), "x");
        assert!(cols[4].is_null(1));
        assert_eq!(
            cols[5].as_primitive::<Int64Type>().values(),
            &[5, 5],
            "{kind:?}: the default"
        );
    }
}

#[test]
fn missing_required_fields_and_misfits_are_errors() {
    let enc = ValueEncoder::new(Kind::Avro as i32, R.as_bytes()).unwrap().unwrap();
    let b = batch();
    let without_id = b.project(&[1, 2, 3, 4]).unwrap();
    let err = enc.payloads(&without_id).unwrap_err();
    assert!(err.message().contains("needs a column \"id\""), "{}", err.message());
    let fields: Vec<Field> = b.schema().fields().iter().map(|f| f.as_ref().clone()).collect();
    let mut cols = b.columns().to_vec();
    cols[3] = Arc::new(StringArray::from(vec!["A", "Z"]));
    let bad = RecordBatch::try_new(Arc::new(Schema::new(Fields::from(fields))), cols).unwrap();
    let err = enc.payloads(&bad).unwrap_err();
    assert!(
        err.message().contains("row 1") && err.message().contains("kind"),
        "{}",
        err.message()
    );
    assert!(ValueEncoder::new(Kind::Protobuf as i32, b"").unwrap().is_none());
}

#[test]
fn decimals_take_their_fewest_bytes_and_print_with_their_scale() {
    assert_eq!(minimal_len(0), 1);
    assert_eq!(minimal_len(127), 1);
    assert_eq!(minimal_len(128), 2);
    assert_eq!(minimal_len(-128), 1);
    assert_eq!(minimal_len(-129), 2);
    assert_eq!(decimal_text(-5, 2), "-0.05");
    assert_eq!(decimal_text(1234, 2), "12.34");
}
