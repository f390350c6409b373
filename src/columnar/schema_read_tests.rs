use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Date32Type, Decimal128Type, Float64Type, Int32Type, Int64Type, TimestampMicrosecondType};
use arrow_array::Array;
use bytes::Bytes;

use super::*;
use crate::columnar::read::tests::message;
use crate::protocol::avro::put_long;
use crate::protocol::pb::MessageMetadata;

const ORDER: &str = r#"{"type":"record","name":"Order","fields":[
    {"name":"id","type":"long"},
    {"name":"note","type":["null","string"],"default":null},
    {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
    {"name":"day","type":{"type":"int","logicalType":"date"}},
    {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
    {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A","B"]}},
    {"name":"tags","type":{"type":"array","items":"string"}},
    {"name":"attrs","type":{"type":"map","values":"long"}},
    {"name":"line","type":{"type":"record","name":"Line","fields":[{"name":"sku","type":"string"},{"name":"qty","type":"int"}]}},
    {"name":"either","type":["null","int","string"],"default":null}]}"#;

fn with_payload(payload: Vec<u8>, version: Option<u64>) -> Message {
    let mut m = message(1, None, &[], None);
    m.payload = Bytes::from(payload);
    let mut meta = MessageMetadata::clone(&m.metadata);
    meta.schema_version = version.map(|v| v.to_be_bytes().to_vec().into());
    m.metadata = Arc::new(meta);
    m
}

fn string(out: &mut Vec<u8>, s: &str) {
    put_long(out, s.len() as i64);
    out.extend_from_slice(s.as_bytes());
}

/// Order(7, "hi", 1.5 s, day 3, 12.34, B, ["x", "y"], {"a": 1}, Line("s", 2), "u") in Avro binary.
fn order() -> Vec<u8> {
    let mut d = Vec::new();
    put_long(&mut d, 7);
    put_long(&mut d, 1);
    string(&mut d, "hi");
    put_long(&mut d, 1500);
    put_long(&mut d, 3);
    put_long(&mut d, 2);
    d.extend_from_slice(&1234i16.to_be_bytes());
    put_long(&mut d, 1);
    put_long(&mut d, 2);
    string(&mut d, "x");
    string(&mut d, "y");
    put_long(&mut d, 0);
    put_long(&mut d, 1);
    string(&mut d, "a");
    put_long(&mut d, 1);
    put_long(&mut d, 0);
    string(&mut d, "s");
    put_long(&mut d, 2);
    put_long(&mut d, 2);
    string(&mut d, "u");
    d
}

fn decode_all(v: &ValueSchema, msgs: &[Message]) -> Result<Vec<ArrayRef>> {
    let refs: Vec<&Message> = msgs.iter().collect();
    v.decode(&refs, &HashMap::new(), "t")
}

#[test]
fn an_avro_record_becomes_columns_of_spark_types() {
    let v = ValueSchema::new(Kind::Avro as i32, ORDER.as_bytes(), &0u64.to_be_bytes())
        .unwrap()
        .unwrap();
    let names: Vec<&str> = v.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(
        names,
        ["id", "note", "at", "day", "price", "kind", "tags", "attrs", "line", "either"]
    );
    assert!(v.fields().iter().all(|f| f.is_nullable()));
    assert_eq!(*v.fields()[4].data_type(), DataType::Decimal128(9, 2));
    let DataType::Struct(members) = v.fields()[9].data_type() else {
        panic!("a union of int and string is a struct")
    };
    assert_eq!(members[0].name(), "member0");
    assert_eq!(*members[1].data_type(), DataType::Utf8);

    let cols = decode_all(&v, &[with_payload(order(), Some(0)), with_payload(order(), None)]).unwrap();
    assert_eq!(cols[0].as_primitive::<Int64Type>().value(1), 7);
    assert_eq!(cols[1].as_string::<i32>().value(0), "hi");
    assert_eq!(cols[2].as_primitive::<TimestampMicrosecondType>().value(0), 1_500_000);
    assert_eq!(cols[3].as_primitive::<Date32Type>().value(0), 3);
    assert_eq!(cols[4].as_primitive::<Decimal128Type>().value(0), 1234);
    assert_eq!(cols[5].as_string::<i32>().value(0), "B");
    let tags = cols[6].as_list::<i32>().value(0);
    assert_eq!(tags.as_string::<i32>().value(1), "y");
    let attrs = cols[7].as_map();
    assert_eq!(attrs.keys().as_string::<i32>().value(0), "a");
    assert_eq!(attrs.values().as_primitive::<Int64Type>().value(0), 1);
    let line = cols[8].as_struct();
    assert_eq!(line.column(1).as_primitive::<Int32Type>().value(0), 2);
    let either = cols[9].as_struct();
    assert!(either.column(0).is_null(0));
    assert_eq!(either.column(1).as_string::<i32>().value(0), "u");
}

#[test]
fn an_older_version_resolves_by_field_name_and_a_missing_one_is_named() {
    let reader = r#"{"type":"record","name":"R","fields":[
        {"name":"a","type":"long"},{"name":"b","type":"string","default":"dflt"},{"name":"c","type":["null","double"],"default":null}]}"#;
    let writer = r#"{"type":"record","name":"R","fields":[
        {"name":"gone","type":"string"},{"name":"c","type":"float"},{"name":"a","type":"int"}]}"#;
    let v = ValueSchema::new(Kind::Avro as i32, reader.as_bytes(), &1u64.to_be_bytes())
        .unwrap()
        .unwrap();
    let mut d = Vec::new();
    string(&mut d, "skipped");
    d.extend_from_slice(&2.5f32.to_le_bytes());
    put_long(&mut d, 42);
    let old = with_payload(d, Some(0));
    let refs = [&old];
    assert_eq!(v.unknown_versions(&refs), vec![0u64.to_be_bytes().to_vec()]);
    let err = decode_all(&v, std::slice::from_ref(&old)).unwrap_err();
    assert!(err.message().contains("schema version 0"), "{}", err.message());
    v.add_writer(
        0u64.to_be_bytes().to_vec(),
        Some((Kind::Avro as i32, writer.as_bytes())),
    );
    assert!(v.unknown_versions(&refs).is_empty());
    let cols = decode_all(&v, &[old]).unwrap();
    assert_eq!(cols[0].as_primitive::<Int64Type>().value(0), 42);
    assert_eq!(cols[1].as_string::<i32>().value(0), "dflt");
    assert_eq!(cols[2].as_primitive::<Float64Type>().value(0), 2.5);
}

#[test]
fn json_payloads_are_read_by_field_name() {
    let v = ValueSchema::new(Kind::Json as i32, ORDER.as_bytes(), &0u64.to_be_bytes())
        .unwrap()
        .unwrap();
    let text = r#"{"id":9,"at":2,"day":1,"price":"-0.5","kind":"A","tags":[],"attrs":{"k":5},
        "line":{"sku":"q","qty":1},"extra":true}"#;
    let cols = decode_all(&v, &[with_payload(text.as_bytes().to_vec(), Some(0))]).unwrap();
    assert_eq!(cols[0].as_primitive::<Int64Type>().value(0), 9);
    assert!(cols[1].is_null(0));
    assert_eq!(cols[2].as_primitive::<TimestampMicrosecondType>().value(0), 2000);
    assert_eq!(cols[4].as_primitive::<Decimal128Type>().value(0), -50);
    assert!(cols[9].is_null(0));
    let bad = decode_all(&v, &[with_payload(b"{\"id\":\"x\"}".to_vec(), None)]).unwrap_err();
    assert!(bad.message().contains("id:"), "{}", bad.message());
}

#[test]
fn bad_payloads_fail_with_the_message_named_and_nothing_panics() {
    let v = ValueSchema::new(Kind::Avro as i32, ORDER.as_bytes(), &[])
        .unwrap()
        .unwrap();
    let mut short = order();
    short.truncate(5);
    let err = decode_all(&v, &[with_payload(short, None)]).unwrap_err();
    assert!(err.message().contains("does not decode"), "{}", err.message());
    let mut long = order();
    long.push(0);
    assert!(decode_all(&v, &[with_payload(long, None)]).is_err());
}

#[test]
fn primitive_schemas_give_a_typed_value_column() {
    let v = ValueSchema::new(Kind::Int64 as i32, b"", &[]).unwrap().unwrap();
    assert_eq!(*v.fields()[0].data_type(), DataType::Int64);
    let cols = decode_all(&v, &[with_payload((-3i64).to_be_bytes().to_vec(), None)]).unwrap();
    assert_eq!(cols[0].as_primitive::<Int64Type>().value(0), -3);
    let s = ValueSchema::new(Kind::String as i32, b"", &[]).unwrap().unwrap();
    let cols = decode_all(&s, &[with_payload(b"hello".to_vec(), None)]).unwrap();
    assert_eq!(cols[0].as_string::<i32>().value(0), "hello");
    assert!(decode_all(&v, &[with_payload(vec![1], None)]).is_err());
    assert!(ValueSchema::new(Kind::ProtobufNative as i32, b"", &[])
        .unwrap()
        .is_none());
    assert!(ValueSchema::new(Kind::None as i32, b"", &[]).unwrap().is_none());
}

#[test]
fn recursive_records_and_misfit_types_are_refused() {
    let rec = r#"{"type":"record","name":"N","fields":[{"name":"next","type":["null","N"]}]}"#;
    let err = ValueSchema::new(Kind::Avro as i32, rec.as_bytes(), &[]).unwrap_err();
    assert!(err.contains("refers to itself"), "{err}");
    let v = ValueSchema::new(Kind::Avro as i32, ORDER.as_bytes(), &[])
        .unwrap()
        .unwrap();
    assert!(v.check_type(0, &DataType::Utf8).is_err());
    assert!(v.check_type(0, &DataType::Int64).is_ok());
}

#[test]
fn decimal_text_and_bytes() {
    assert_eq!(parse_decimal("12.3", 2), Some(1230));
    assert_eq!(parse_decimal("-0.05", 2), Some(-5));
    assert_eq!(parse_decimal("1.234", 2), None);
    assert_eq!(unscaled(&[0xFF, 0x38]).unwrap(), -200);
}

fn avro(schema: &str) -> ValueSchema {
    ValueSchema::new(Kind::Avro as i32, schema.as_bytes(), &1u64.to_be_bytes())
        .unwrap()
        .unwrap()
}

/// `reader` reading a payload written with `writer` (registered as version 0).
fn resolved(reader: &str, writer: &str, payload: Vec<u8>) -> Result<Vec<ArrayRef>> {
    let v = avro(reader);
    v.add_writer(
        0u64.to_be_bytes().to_vec(),
        Some((Kind::Avro as i32, writer.as_bytes())),
    );
    decode_all(&v, &[with_payload(payload, Some(0))])
}

#[test]
fn a_count_of_empty_records_is_bounded_before_it_is_built() {
    let v = avro(
        r#"{"type":"record","name":"R","fields":[
            {"name":"a","type":{"type":"array","items":{"type":"record","name":"E","fields":[]}}}]}"#,
    );
    let nulls = |n: i64| {
        let mut d = Vec::new();
        put_long(&mut d, n);
        put_long(&mut d, 0);
        d
    };
    let cols = decode_all(&v, &[with_payload(nulls(3), None)]).unwrap();
    assert_eq!(cols[0].as_list::<i32>().value(0).len(), 3);
    for n in [
        super::super::schema_cols::MAX_EMPTY_ITEMS as i64 + 1,
        1 << 62,
        -(1 << 62),
    ] {
        let mut d = nulls(n);
        if n < 0 {
            d.insert(d.len() - 1, 0); // the block's byte size
        }
        let err = decode_all(&v, &[with_payload(d, None)]).unwrap_err();
        assert!(err.message().contains("items of no bytes"), "{}", err.message());
    }
}

#[test]
fn a_union_resolves_by_type_not_by_position() {
    let reader = r#"{"type":"record","name":"R","fields":[{"name":"u","type":["null","bytes","string","long"]}]}"#;
    let writer = r#"{"type":"record","name":"R","fields":[{"name":"u","type":["null","string","long","bytes"]}]}"#;
    let mut d = Vec::new();
    put_long(&mut d, 1);
    string(&mut d, "s");
    let cols = resolved(reader, writer, d).unwrap();
    let u = cols[0].as_struct();
    assert!(u.column(0).is_null(0), "a string went to the bytes member");
    assert_eq!(u.column(1).as_string::<i32>().value(0), "s");
    let mut d = Vec::new();
    put_long(&mut d, 2);
    put_long(&mut d, 9);
    let cols = resolved(reader, writer, d).unwrap();
    assert_eq!(cols[0].as_struct().column(2).as_primitive::<Int64Type>().value(0), 9);
    // a writer's plain type goes to the member of its type; an int is promoted to the long
    let plain = r#"{"type":"record","name":"R","fields":[{"name":"u","type":"int"}]}"#;
    let mut d = Vec::new();
    put_long(&mut d, -4);
    let cols = resolved(reader, plain, d).unwrap();
    assert_eq!(cols[0].as_struct().column(2).as_primitive::<Int64Type>().value(0), -4);
    let boolean = r#"{"type":"record","name":"R","fields":[{"name":"u","type":"boolean"}]}"#;
    let err = resolved(reader, boolean, vec![1]).unwrap_err();
    assert!(err.message().contains("no member"), "{}", err.message());
}

#[test]
fn a_plain_long_read_as_timestamp_millis_is_in_millis() {
    let reader = r#"{"type":"record","name":"R","fields":[{"name":"t","type":{"type":"long","logicalType":"timestamp-millis"}}]}"#;
    let writer = r#"{"type":"record","name":"R","fields":[{"name":"t","type":"long"}]}"#;
    let mut d = Vec::new();
    put_long(&mut d, 1500);
    let cols = resolved(reader, writer, d).unwrap();
    assert_eq!(cols[0].as_primitive::<TimestampMicrosecondType>().value(0), 1_500_000);
}

#[test]
fn timestamps_and_dates_out_of_range_fail_rather_than_clamp() {
    let v = avro(
        r#"{"type":"record","name":"R","fields":[{"name":"t","type":{"type":"long","logicalType":"timestamp-millis"}}]}"#,
    );
    let mut d = Vec::new();
    put_long(&mut d, i64::MAX / 10);
    let err = decode_all(&v, &[with_payload(d, None)]).unwrap_err();
    assert!(err.message().contains("out of range"), "{}", err.message());
    let j = ValueSchema::new(Kind::Json as i32, br#"{"type":"record","name":"R","fields":[{"name":"t","type":{"type":"long","logicalType":"timestamp-millis"}}]}"#, &[])
        .unwrap()
        .unwrap();
    let text = format!(r#"{{"t":{}}}"#, i64::MAX / 10);
    assert!(decode_all(&j, &[with_payload(text.into_bytes(), None)]).is_err());
    let ts = ValueSchema::new(Kind::Timestamp as i32, b"", &[]).unwrap().unwrap();
    assert!(decode_all(&ts, &[with_payload(i64::MAX.to_be_bytes().to_vec(), None)]).is_err());
    // java.util.Date far past year 5,000,000: no day an int holds, not a clamped one
    let date = ValueSchema::new(Kind::Date as i32, b"", &[]).unwrap().unwrap();
    assert!(decode_all(&date, &[with_payload(i64::MAX.to_be_bytes().to_vec(), None)]).is_err());
    let cols = decode_all(&date, &[with_payload((-86_400_000i64).to_be_bytes().to_vec(), None)]).unwrap();
    assert_eq!(cols[0].as_primitive::<Date32Type>().value(0), -1);
}

#[test]
fn a_skipped_recursive_field_nests_only_so_deep() {
    let writer =
        r#"{"type":"record","name":"N","fields":[{"name":"v","type":"long"},{"name":"next","type":["null","N"]}]}"#;
    let reader = r#"{"type":"record","name":"N","fields":[{"name":"v","type":"long"}]}"#;
    let list = |n: usize| {
        let mut d = Vec::new();
        for _ in 0..n {
            put_long(&mut d, 5);
            put_long(&mut d, 1);
        }
        put_long(&mut d, 5);
        put_long(&mut d, 0);
        d
    };
    let cols = resolved(reader, writer, list(100)).unwrap();
    assert_eq!(cols[0].as_primitive::<Int64Type>().value(0), 5);
    let err = resolved(reader, writer, list(1_000_000)).unwrap_err();
    assert!(err.message().contains("nested more than"), "{}", err.message());
}

#[test]
fn avro_defaults_of_bytes_are_code_points_and_decimals_fit_their_precision() {
    let reader = r#"{"type":"record","name":"R","fields":[{"name":"a","type":"long"},
        {"name":"b","type":"bytes","default":"\u00ff\u0001"},
        {"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":4,"scale":2},"default":"\u0004\u00d2"}]}"#;
    let writer = r#"{"type":"record","name":"R","fields":[{"name":"a","type":"long"}]}"#;
    let mut d = Vec::new();
    put_long(&mut d, 1);
    let cols = resolved(reader, writer, d).unwrap();
    assert_eq!(cols[1].as_binary::<i32>().value(0), [0xFF, 1]);
    assert_eq!(cols[2].as_primitive::<Decimal128Type>().value(0), 1234);
    // 1234.56 has six digits: not a decimal(4, 2)
    let v = avro(reader);
    let mut d = Vec::new();
    put_long(&mut d, 1);
    put_long(&mut d, 1);
    d.push(0);
    put_long(&mut d, 3);
    d.extend_from_slice(&[0x01, 0xE2, 0x40]);
    let err = decode_all(&v, &[with_payload(d, None)]).unwrap_err();
    assert!(err.message().contains("more than 4 digits"), "{}", err.message());
    // plain bytes read as the reader's decimal
    let bytes = r#"{"type":"record","name":"R","fields":[{"name":"a","type":"long"},{"name":"d","type":"bytes"}]}"#;
    let mut d = Vec::new();
    put_long(&mut d, 1);
    put_long(&mut d, 2);
    d.extend_from_slice(&[0xFF, 0x38]);
    let cols = resolved(reader, bytes, d).unwrap();
    assert_eq!(cols[2].as_primitive::<Decimal128Type>().value(0), -200);
}

#[test]
fn a_nested_field_missing_without_default_is_named() {
    let reader = r#"{"type":"record","name":"R","fields":[{"name":"in","type":{"type":"record","name":"I","fields":[
        {"name":"x","type":"long"},{"name":"y","type":"long"}]}}]}"#;
    let writer = r#"{"type":"record","name":"R","fields":[{"name":"in","type":{"type":"record","name":"I","fields":[
        {"name":"x","type":"long"}]}}]}"#;
    let mut d = Vec::new();
    put_long(&mut d, 1);
    let err = resolved(reader, writer, d).unwrap_err();
    assert!(
        err.message().contains("y: missing and without a default"),
        "{}",
        err.message()
    );
}

#[test]
fn json_of_a_union_of_several_types_fills_the_member_of_its_type() {
    let schema = r#"{"type":"record","name":"R","fields":[{"name":"u","type":["null","string","long","double"]}]}"#;
    let v = ValueSchema::new(Kind::Json as i32, schema.as_bytes(), &[])
        .unwrap()
        .unwrap();
    let DataType::Struct(members) = v.fields()[0].data_type() else {
        panic!("a union of string and long is a struct")
    };
    let names: Vec<&str> = members.iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["member0", "member1", "member2"]);
    let rows: Vec<Message> = [r#"{"u":"a"}"#, r#"{"u":5}"#, r#"{"u":null}"#, r#"{"u":2.5}"#, "{}"]
        .iter()
        .map(|t| with_payload(t.as_bytes().to_vec(), None))
        .collect();
    let cols = decode_all(&v, &rows).unwrap();
    let u = cols[0].as_struct();
    assert_eq!(u.column(0).as_string::<i32>().value(0), "a");
    assert!(u.column(1).is_null(0) && u.column(2).is_null(0));
    assert_eq!(u.column(1).as_primitive::<Int64Type>().value(1), 5);
    assert!(u.column(0).is_null(1));
    assert!(u.is_null(2) && u.is_null(4));
    assert_eq!(u.column(2).as_primitive::<Float64Type>().value(3), 2.5);
    let err = decode_all(&v, &[with_payload(br#"{"u":true}"#.to_vec(), None)]).unwrap_err();
    assert!(err.message().contains("fits no member"), "{}", err.message());
}

#[test]
fn the_fuzz_harness_seeds_decode() {
    for seed in crate::columnar::fuzzing::seeds() {
        crate::columnar::fuzzing::schema_payload(&seed);
    }
    // the Avro seed decodes whole (not just fails cleanly)
    let seeds = crate::columnar::fuzzing::seeds();
    let avro = seeds.iter().find(|s| s[0] == 0).unwrap();
    let v = ValueSchema::new(Kind::Avro as i32, crate::columnar::fuzzing::READER.as_bytes(), &[])
        .unwrap()
        .unwrap();
    let cols = decode_all(&v, &[with_payload(avro[2..].to_vec(), None)]).unwrap();
    assert_eq!(cols[0].as_primitive::<Int64Type>().value(0), 7);
}

#[test]
fn a_null_where_the_type_holds_none_is_the_messages_decode_error() {
    let v = ValueSchema::new(Kind::Json as i32, ORDER.as_bytes(), &[])
        .unwrap()
        .unwrap();
    let text = br#"{"id":9,"at":2,"day":1,"price":"1","kind":"A","tags":[null],"attrs":{},"line":{"sku":"q","qty":1}}"#;
    let err = decode_all(&v, &[with_payload(text.to_vec(), None)]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SchemaDecode);
    assert!(
        err.message().contains("null where the type holds none"),
        "{}",
        err.message()
    );
    // an Avro writer's null into the reader's non-null map values
    let reader = r#"{"type":"record","name":"R","fields":[{"name":"m","type":{"type":"map","values":"long"}}]}"#;
    let writer =
        r#"{"type":"record","name":"R","fields":[{"name":"m","type":{"type":"map","values":["null","long"]}}]}"#;
    let mut d = Vec::new();
    put_long(&mut d, 1);
    string(&mut d, "k");
    put_long(&mut d, 0);
    put_long(&mut d, 0);
    let err = resolved(reader, writer, d).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::SchemaDecode, "{}", err.message());
}

#[test]
fn an_int_read_as_a_wider_type_must_still_be_an_int() {
    // found by the schema fuzzer: the int branch of [int, long] took a long's varint
    let v = avro(r#"{"type":"record","name":"R","fields":[{"name":"w","type":["int","long"]}]}"#);
    let mut d = Vec::new();
    put_long(&mut d, 0);
    put_long(&mut d, 1 << 40);
    let err = decode_all(&v, &[with_payload(d, None)]).unwrap_err();
    assert!(err.message().contains("out of range for an int"), "{}", err.message());
    let mut d = Vec::new();
    put_long(&mut d, 1);
    put_long(&mut d, 1 << 40);
    let cols = decode_all(&v, &[with_payload(d, None)]).unwrap();
    assert_eq!(cols[0].as_primitive::<Int64Type>().value(0), 1 << 40);
}
