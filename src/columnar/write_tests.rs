use std::sync::Arc;

use arrow_array::builder::{MapBuilder, StringBuilder};
use arrow_array::{
    ArrayRef, BinaryArray, Float64Array, Int64Array, LargeStringArray, StringArray, TimestampMicrosecondArray,
};

use super::*;
use crate::client::ErrorKind;

const ROLES: Roles<'static> = Roles {
    value: "value",
    key: Some("key"),
    properties: Some("properties"),
    event_time: Some("event_time"),
};

fn batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
    RecordBatch::try_from_iter(cols).unwrap()
}

fn props() -> ArrayRef {
    let mut b = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
    b.keys().append_value("a");
    b.values().append_value("1");
    b.keys().append_value("b");
    b.values().append_null();
    b.append(true).unwrap();
    b.append(false).unwrap();
    Arc::new(b.finish())
}

#[test]
fn every_role_is_read_from_its_column() {
    let b = batch(vec![
        (
            "value",
            Arc::new(BinaryArray::from(vec![&b"x"[..], &b"yz"[..]])) as ArrayRef,
        ),
        ("key", Arc::new(StringArray::from(vec![Some("k"), None]))),
        ("properties", props()),
        (
            "event_time",
            Arc::new(TimestampMicrosecondArray::from(vec![Some(1_500_999), None]).with_timezone("UTC")),
        ),
    ]);
    let msgs = messages(&b, &ROLES).unwrap();
    assert_eq!(msgs.len(), 2);
    assert_eq!((&msgs[0].payload[..], &msgs[1].payload[..]), (&b"x"[..], &b"yz"[..]));
    assert_eq!((msgs[0].key.as_deref(), msgs[1].key.as_deref()), (Some("k"), None));
    assert_eq!(
        msgs[0].properties,
        vec![("a".into(), "1".into()), ("b".into(), String::new())]
    );
    assert!(msgs[1].properties.is_empty());
    assert_eq!((msgs[0].event_time, msgs[1].event_time), (Some(1_500), None));
}

#[test]
fn string_values_long_offsets_and_millisecond_integers_work() {
    let b = batch(vec![
        ("value", Arc::new(LargeStringArray::from(vec!["héllo"])) as ArrayRef),
        ("event_time", Arc::new(Int64Array::from(vec![42]))),
        ("key", Arc::new(BinaryArray::from(vec![&b"bin"[..]]))),
    ]);
    let msgs = messages(&b, &ROLES).unwrap();
    assert_eq!(&msgs[0].payload[..], "héllo".as_bytes());
    assert_eq!((msgs[0].event_time, msgs[0].key.as_deref()), (Some(42), Some("bin")));
}

#[test]
fn missing_optional_columns_leave_the_fields_unset() {
    let b = batch(vec![("value", Arc::new(StringArray::from(vec!["a"])) as ArrayRef)]);
    let msgs = messages(&b, &ROLES).unwrap();
    assert_eq!((msgs[0].key.clone(), msgs[0].event_time), (None, None));
}

#[test]
fn wrong_types_nulls_and_missing_values_are_invalid_configuration() {
    let cases: Vec<(RecordBatch, &str)> = vec![
        (
            batch(vec![("key", Arc::new(StringArray::from(vec!["k"])) as ArrayRef)]),
            "has no \"value\" column",
        ),
        (
            batch(vec![("value", Arc::new(Int64Array::from(vec![1])) as ArrayRef)]),
            "must be binary or string, not Int64",
        ),
        (
            batch(vec![(
                "value",
                Arc::new(StringArray::from(vec![Some("a"), None])) as ArrayRef,
            )]),
            "1 null value(s)",
        ),
        (
            batch(vec![
                ("value", Arc::new(StringArray::from(vec!["a"])) as ArrayRef),
                ("event_time", Arc::new(Float64Array::from(vec![1.5]))),
            ]),
            "must be a timestamp or milliseconds (long), not Float64",
        ),
        (
            batch(vec![
                ("value", Arc::new(StringArray::from(vec!["a"])) as ArrayRef),
                ("properties", Arc::new(StringArray::from(vec!["p"]))),
            ]),
            "must be map<string, string>, not Utf8",
        ),
        (
            batch(vec![
                ("value", Arc::new(StringArray::from(vec!["a"])) as ArrayRef),
                ("key", Arc::new(BinaryArray::from(vec![&[0xff_u8][..]]))),
            ]),
            "the key of row 0 is not UTF-8",
        ),
        (
            batch(vec![
                ("value", Arc::new(StringArray::from(vec!["a"])) as ArrayRef),
                ("event_time", Arc::new(Int64Array::from(vec![-5]))),
            ]),
            "before 1970",
        ),
    ];
    for (b, want) in cases {
        let e = messages(&b, &ROLES).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidConfiguration, "{e}");
        assert!(e.message().contains(want), "{e} does not say {want}");
    }
}
