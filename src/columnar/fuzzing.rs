//! The harness of the `schema` fuzzer (`fuzz/`, docs/fuzzing.md): payloads decoded with a
//! topic's schema into Arrow columns ([`super::schema_read::ValueSchema`]), kept in the crate
//! so that `tests/fuzz_corpus.rs` replays the committed corpus in plain `cargo test`.
//!
//! An input is `[schema][messages][n - 1 payload sizes][payload bytes]`: the first byte picks
//! one of the fixed schemas below (Avro read with its own version or resolved from an older
//! writer's, JSON, the primitives), the second how many messages (1 to 3), then the sizes of
//! all but the last payload; the last takes the rest. A panic is a bug found, and so is a
//! failure that is not a `SchemaDecode` error naming the message, or a decoded batch whose
//! columns are not one row per message, or an Avro payload that decodes although the
//! schema's own validator ([`crate::protocol::avro::AvroSchema::check_binary`]) refuses it.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use super::schema_read::ValueSchema;
use crate::client::{ErrorKind, Message, MessageId};
use crate::protocol::avro::{put_long, AvroSchema};
use crate::protocol::pb::schema::Type as Kind;
use crate::protocol::pb::MessageMetadata;

/// A reader schema with nested records, arrays, maps, unions, decimals and logical types.
pub const READER: &str = r#"{"type":"record","name":"Order","namespace":"f","fields":[
 {"name":"id","type":"long"},
 {"name":"n","type":"int"},
 {"name":"ok","type":"boolean"},
 {"name":"f","type":"float"},
 {"name":"d","type":"double"},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"us","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
 {"name":"big","type":{"type":"fixed","name":"B16","size":16,"logicalType":"decimal","precision":38,"scale":4}},
 {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A","B","C"]}},
 {"name":"raw","type":"bytes","default":"\u00ff"},
 {"name":"hash","type":{"type":"fixed","name":"H","size":4}},
 {"name":"tags","type":{"type":"array","items":"string"}},
 {"name":"nothing","type":{"type":"array","items":{"type":"record","name":"E","fields":[]}}},
 {"name":"attrs","type":{"type":"map","values":["null","long"]}},
 {"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line","fields":[
   {"name":"sku","type":"string"},{"name":"qty","type":"int","default":1},
   {"name":"sub","type":{"type":"map","values":{"type":"array","items":"double"}}}]}}},
 {"name":"either","type":["null","int","string","Line"],"default":null},
 {"name":"wide","type":["int","long"]},
 {"name":"empty","type":"E"}]}"#;

/// An older writer of [`READER`]: fields reordered, dropped and added (a recursive one the
/// reader skips), types promoted, a union reordered, plain types where the reader has logical ones.
pub const WRITER: &str = r#"{"type":"record","name":"Order","namespace":"f","fields":[
 {"name":"n","type":"int"},
 {"name":"id","type":"int"},
 {"name":"gone","type":{"type":"record","name":"Node","fields":[{"name":"v","type":"long"},{"name":"next","type":["null","Node"]}]}},
 {"name":"f","type":"long"},
 {"name":"d","type":"float"},
 {"name":"note","type":"string"},
 {"name":"at","type":"long"},
 {"name":"day","type":"int"},
 {"name":"price","type":"bytes"},
 {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["C","B","A","D"]}},
 {"name":"tags","type":{"type":"array","items":"bytes"}},
 {"name":"lines","type":{"type":"array","items":{"type":"record","name":"Line","fields":[
   {"name":"extra","type":["null","Line"]},{"name":"sku","type":"string"},
   {"name":"sub","type":{"type":"map","values":{"type":"array","items":"float"}}}]}}},
 {"name":"either","type":["string","null","Line","long"]},
 {"name":"attrs","type":{"type":"map","values":"long"}},
 {"name":"wide","type":"int"}]}"#;

/// A JSON schema whose fields are unions of several types, beside nested ones.
pub const JSON_UNIONS: &str = r#"{"type":"record","name":"U","fields":[
 {"name":"u","type":["null","string","long","double","boolean"]},
 {"name":"r","type":["null",{"type":"record","name":"In","fields":[{"name":"x","type":["null","long","string"]}]},{"type":"array","items":"long"}]},
 {"name":"m","type":{"type":"map","values":["null","string","long"]}},
 {"name":"b","type":"bytes","default":""}]}"#;

const PRIMITIVES: [Kind; 10] = [
    Kind::String,
    Kind::Bool,
    Kind::Int8,
    Kind::Int16,
    Kind::Int32,
    Kind::Int64,
    Kind::Float,
    Kind::Double,
    Kind::Date,
    Kind::Timestamp,
];

/// A schema the harness decodes with, and the writer version its messages carry.
struct Case {
    values: ValueSchema,
    version: Option<u64>,
    /// The writer's definition, for Avro: what a decoded payload must be a datum of.
    writer: Option<AvroSchema>,
}

fn cases() -> &'static [Case] {
    static CASES: OnceLock<Vec<Case>> = OnceLock::new();
    CASES.get_or_init(|| {
        let schema = |kind: Kind, text: &str| {
            ValueSchema::new(kind as i32, text.as_bytes(), &1u64.to_be_bytes())
                .expect("a harness schema compiles")
                .expect("a harness schema has columns")
        };
        let avro = |text: &str| Some(AvroSchema::parse(text).expect("a harness schema parses"));
        let evolved = schema(Kind::Avro, READER);
        evolved.add_writer(
            0u64.to_be_bytes().to_vec(),
            Some((Kind::Avro as i32, WRITER.as_bytes())),
        );
        let mut out = vec![
            Case {
                values: schema(Kind::Avro, READER),
                version: Some(1),
                writer: avro(READER),
            },
            Case {
                values: evolved,
                version: Some(0),
                writer: avro(WRITER),
            },
            Case {
                values: schema(Kind::Json, READER),
                version: None,
                writer: None,
            },
            Case {
                values: schema(Kind::Json, JSON_UNIONS),
                version: None,
                writer: None,
            },
            Case {
                values: schema(Kind::Avro, JSON_UNIONS),
                version: None,
                writer: avro(JSON_UNIONS),
            },
        ];
        out.extend(PRIMITIVES.iter().map(|k| Case {
            values: schema(*k, ""),
            version: None,
            writer: None,
        }));
        out
    })
}

fn message(i: usize, payload: &[u8], version: Option<u64>) -> Message {
    let meta = MessageMetadata {
        schema_version: version.map(|v| v.to_be_bytes().to_vec().into()),
        ..Default::default()
    };
    Message::delivered(
        Arc::from("persistent://public/default/fuzz"),
        MessageId::new(1, i as i64, -1, -1),
        Bytes::copy_from_slice(payload),
        meta,
    )
}

/// Decodes the messages an input describes; panics when an invariant of the decoder breaks.
pub fn schema_payload(data: &[u8]) {
    let (&choice, rest) = data.split_first().unwrap_or((&0, &[]));
    let (&count, mut rest) = rest.split_first().unwrap_or((&0, &[]));
    let case = &cases()[usize::from(choice) % cases().len()];
    let n = usize::from(count % 3) + 1;
    let mut payloads = Vec::with_capacity(n);
    for _ in 1..n {
        let (&size, tail) = rest.split_first().unwrap_or((&0, &[]));
        let (head, tail) = tail.split_at(usize::from(size).min(tail.len()));
        payloads.push(head);
        rest = tail;
    }
    payloads.push(rest);
    let msgs: Vec<Message> = payloads
        .iter()
        .enumerate()
        .map(|(i, p)| message(i, p, case.version))
        .collect();
    let refs: Vec<&Message> = msgs.iter().collect();
    match case.values.decode(&refs, &HashMap::new(), "fuzz") {
        Ok(cols) => {
            assert_eq!(cols.len(), case.values.fields().len(), "one array per column");
            for c in &cols {
                assert_eq!(c.len(), n, "one row per message");
            }
            if let Some(w) = &case.writer {
                for p in &payloads {
                    assert!(
                        w.check_binary(p).is_ok(),
                        "decoded a payload the writer's schema refuses: {:?}",
                        w.check_binary(p)
                    );
                }
            }
        }
        Err(e) => {
            assert_eq!(e.kind(), ErrorKind::SchemaDecode, "{}", e.message());
            assert!(e.message().contains("of fuzz (schema version"), "{}", e.message());
        }
    }
}

/// Seed inputs: a valid datum of each schema, so the fuzzer starts past the first field.
pub fn seeds() -> Vec<Vec<u8>> {
    let json = br#"{"id":1,"n":2,"ok":true,"f":1.5,"d":2.5,"note":"x","at":3,"us":4,"day":5,"price":"1.25",
        "big":"-3.5","kind":"B","raw":"AA==","hash":"AAAAAA==","tags":["t"],"nothing":[{},{}],
        "attrs":{"k":1,"z":null},"lines":[{"sku":"s","sub":{"a":[1.0]}}],"either":"e","wide":7,"empty":{}}"#;
    let unions = br#"{"u":5,"r":{"x":"y"},"m":{"a":"b","c":3,"d":null},"b":"AQ=="}"#;
    let mut out = vec![
        [vec![2, 0], json.to_vec()].concat(),
        [vec![3, 0], unions.to_vec()].concat(),
        [vec![3, 1, 6], br#"{"u":1}{"u":"s","r":[1,2]}"#.to_vec()].concat(),
    ];
    out.push([vec![0, 0], order()].concat());
    for (i, _) in PRIMITIVES.iter().enumerate() {
        out.push([vec![5 + i as u8, 0], 7i64.to_be_bytes().to_vec()].concat());
    }
    out
}

/// A datum of [`READER`] in Avro binary.
fn order() -> Vec<u8> {
    let mut d = Vec::new();
    let long = |d: &mut Vec<u8>, n: i64| put_long(d, n);
    let bytes = |d: &mut Vec<u8>, b: &[u8]| {
        put_long(d, b.len() as i64);
        d.extend_from_slice(b);
    };
    long(&mut d, 7); // id
    long(&mut d, -2); // n
    d.push(1); // ok
    d.extend_from_slice(&1.5f32.to_le_bytes());
    d.extend_from_slice(&2.5f64.to_le_bytes());
    long(&mut d, 1); // note: the string branch
    bytes(&mut d, b"hi");
    long(&mut d, 1500); // at
    long(&mut d, 1_500_000); // us
    long(&mut d, 3); // day
    bytes(&mut d, &1234i16.to_be_bytes()); // price
    d.extend_from_slice(&(-35_000i128).to_be_bytes()); // big
    long(&mut d, 2); // kind
    bytes(&mut d, &[0, 0xFF]); // raw
    d.extend_from_slice(b"hash");
    long(&mut d, 1); // tags
    bytes(&mut d, b"t");
    long(&mut d, 0);
    long(&mut d, 2); // nothing: two empty records
    long(&mut d, 0);
    long(&mut d, -1); // attrs: a block with its byte size
    long(&mut d, 4);
    bytes(&mut d, b"k");
    long(&mut d, 1);
    long(&mut d, 9);
    long(&mut d, 0);
    long(&mut d, 1); // lines
    bytes(&mut d, b"s");
    long(&mut d, 4); // qty
    long(&mut d, 1); // sub
    bytes(&mut d, b"a");
    long(&mut d, 1);
    d.extend_from_slice(&0.5f64.to_le_bytes());
    long(&mut d, 0);
    long(&mut d, 0);
    long(&mut d, 0);
    long(&mut d, 2); // either: the string branch
    bytes(&mut d, b"e");
    long(&mut d, 1); // wide: the long branch
    long(&mut d, 1 << 40);
    d
}
