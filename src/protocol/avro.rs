//! Avro schemas compiled for encoding and decoding (the Avro 1.11 specification): named
//! records and enums in tables, references resolved to indexes, and the zig-zag varints of
//! the binary encoding. Pure; what values look like is the caller's business.

use std::collections::HashMap;

use serde_json::Value;

/// A type of a compiled schema.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    /// `long` with logical type `timestamp-millis`.
    TimestampMillis,
    /// `long` with logical type `timestamp-micros`.
    TimestampMicros,
    /// `bytes` (`fixed` of `Some(size)`) with logical type `decimal`: a big-endian two's
    /// complement unscaled value.
    Decimal {
        precision: u32,
        scale: u32,
        fixed: Option<usize>,
    },
    /// `int` with logical type `date`.
    Date,
    Fixed(usize),
    /// Index into [`AvroSchema::enums`].
    Enum(usize),
    /// Index into [`AvroSchema::records`].
    Record(usize),
    Array(Box<Node>),
    Map(Box<Node>),
    Union(Vec<Node>),
}

/// A record field.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    pub name: String,
    pub node: Node,
    pub default: Option<Value>,
}

/// A named record.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub name: String,
    pub fields: Vec<Field>,
}

/// A named enum.
#[derive(Debug, Clone, PartialEq)]
pub struct EnumType {
    pub name: String,
    pub symbols: Vec<String>,
}

/// A compiled schema: the root type and the named types it uses.
#[derive(Debug, Clone, PartialEq)]
pub struct AvroSchema {
    pub root: Node,
    pub records: Vec<Record>,
    pub enums: Vec<EnumType>,
}

#[derive(Clone, Copy)]
enum Named {
    Record(usize),
    Enum(usize),
    Fixed(usize),
}

struct Compiler {
    records: Vec<Record>,
    enums: Vec<EnumType>,
    names: HashMap<String, Named>,
}

impl AvroSchema {
    /// Compiles an Avro definition (JSON text).
    pub fn parse(text: &str) -> Result<AvroSchema, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let mut c = Compiler {
            records: Vec::new(),
            enums: Vec::new(),
            names: HashMap::new(),
        };
        let root = c.node(&v, None)?;
        Ok(AvroSchema {
            root,
            records: c.records,
            enums: c.enums,
        })
    }
}

impl Compiler {
    fn named(&self, name: &str) -> Result<Node, String> {
        match self.names.get(name) {
            Some(Named::Record(i)) => Ok(Node::Record(*i)),
            Some(Named::Enum(i)) => Ok(Node::Enum(*i)),
            Some(Named::Fixed(n)) => Ok(Node::Fixed(*n)),
            None => Err(format!("unknown Avro type {name:?}")),
        }
    }

    fn register(&mut self, v: &Value, ns: Option<&str>, what: Named) -> Result<(String, Option<String>), String> {
        let name = v["name"].as_str().ok_or("a named type without a name")?.to_string();
        let ns = v["namespace"].as_str().or(ns).filter(|s| !s.is_empty());
        let full = match ns {
            Some(ns) if !name.contains('.') => format!("{ns}.{name}"),
            _ => name.clone(),
        };
        let short = name.rsplit('.').next().unwrap_or(&name).to_string();
        self.names.insert(full, what);
        self.names.entry(short.clone()).or_insert(what);
        let inner_ns = name
            .rsplit_once('.')
            .map(|(n, _)| n.to_string())
            .or(ns.map(str::to_string));
        Ok((short, inner_ns))
    }

    fn node(&mut self, v: &Value, ns: Option<&str>) -> Result<Node, String> {
        match v {
            Value::String(s) => self.primitive(s).map_or_else(|| self.named(s), Ok),
            Value::Array(branches) => Ok(Node::Union(
                branches.iter().map(|b| self.node(b, ns)).collect::<Result<_, _>>()?,
            )),
            Value::Object(o) => {
                let t = o.get("type").ok_or("a type without \"type\"")?;
                let Value::String(t) = t else {
                    return self.node(t, ns);
                };
                match (t.as_str(), o.get("logicalType").and_then(Value::as_str)) {
                    ("long", Some("timestamp-millis")) => return Ok(Node::TimestampMillis),
                    ("long", Some("timestamp-micros")) => return Ok(Node::TimestampMicros),
                    ("int", Some("date")) => return Ok(Node::Date),
                    (kind @ ("bytes" | "fixed"), Some("decimal")) => {
                        // An invalid decimal is its underlying type, as the specification says.
                        let precision = o.get("precision").and_then(Value::as_u64).unwrap_or(0);
                        let scale = o.get("scale").and_then(Value::as_u64).unwrap_or(0);
                        if precision > 0 && scale <= precision {
                            let fixed = match kind {
                                "fixed" => {
                                    let size = o.get("size").and_then(Value::as_u64).ok_or("a fixed without size")?;
                                    self.register(v, ns, Named::Fixed(size as usize))?;
                                    Some(size as usize)
                                }
                                _ => None,
                            };
                            return Ok(Node::Decimal {
                                precision: precision as u32,
                                scale: scale as u32,
                                fixed,
                            });
                        }
                    }
                    _ => {}
                }
                match t.as_str() {
                    "record" | "error" => {
                        let idx = self.records.len();
                        self.records.push(Record {
                            name: String::new(),
                            fields: Vec::new(),
                        });
                        let (name, inner_ns) = self.register(v, ns, Named::Record(idx))?;
                        let mut fields = Vec::new();
                        for f in o
                            .get("fields")
                            .and_then(Value::as_array)
                            .ok_or("a record without fields")?
                        {
                            fields.push(Field {
                                name: f["name"].as_str().ok_or("a field without a name")?.to_string(),
                                node: self.node(&f["type"], inner_ns.as_deref())?,
                                default: f.get("default").cloned(),
                            });
                        }
                        self.records[idx] = Record { name, fields };
                        Ok(Node::Record(idx))
                    }
                    "enum" => {
                        let idx = self.enums.len();
                        let (name, _) = self.register(v, ns, Named::Enum(idx))?;
                        let symbols = o
                            .get("symbols")
                            .and_then(Value::as_array)
                            .ok_or("an enum without symbols")?
                            .iter()
                            .map(|s| {
                                s.as_str()
                                    .map(str::to_string)
                                    .ok_or("an enum symbol that is not a string")
                            })
                            .collect::<Result<_, _>>()?;
                        self.enums.push(EnumType { name, symbols });
                        Ok(Node::Enum(idx))
                    }
                    "fixed" => {
                        let size = o.get("size").and_then(Value::as_u64).ok_or("a fixed without size")? as usize;
                        self.register(v, ns, Named::Fixed(size))?;
                        Ok(Node::Fixed(size))
                    }
                    "array" => Ok(Node::Array(Box::new(
                        self.node(o.get("items").ok_or("an array without items")?, ns)?,
                    ))),
                    "map" => Ok(Node::Map(Box::new(
                        self.node(o.get("values").ok_or("a map without values")?, ns)?,
                    ))),
                    other => self.primitive(other).map_or_else(|| self.named(other), Ok),
                }
            }
            _ => Err(format!("not an Avro type: {v}")),
        }
    }

    fn primitive(&self, name: &str) -> Option<Node> {
        Some(match name {
            "null" => Node::Null,
            "boolean" => Node::Boolean,
            "int" => Node::Int,
            "long" => Node::Long,
            "float" => Node::Float,
            "double" => Node::Double,
            "bytes" => Node::Bytes,
            "string" => Node::String,
            _ => return None,
        })
    }
}

/// Appends `n` as a zig-zag varint.
pub fn put_long(out: &mut Vec<u8>, n: i64) {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// Reads a zig-zag varint at `*pos`.
pub fn get_long(data: &[u8], pos: &mut usize) -> Result<i64, String> {
    let mut z: u64 = 0;
    let mut shift = 0;
    loop {
        let b = *data.get(*pos).ok_or("truncated Avro data")?;
        *pos += 1;
        // The tenth byte holds the 64th bit alone: more would be bits beyond an i64.
        if shift > 63 || (shift == 63 && b > 1) {
            return Err("varint too long".into());
        }
        z |= u64::from(b & 0x7F) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    Ok((z >> 1) as i64 ^ -((z & 1) as i64))
}

/// Takes `n` bytes at `*pos`.
pub fn take<'a>(data: &'a [u8], pos: &mut usize, n: usize) -> Result<&'a [u8], String> {
    let end = pos
        .checked_add(n)
        .filter(|e| *e <= data.len())
        .ok_or("truncated Avro data")?;
    let s = &data[*pos..end];
    *pos = end;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for n in [0i64, -1, 1, 63, -64, 64, 1 << 40, i64::MIN, i64::MAX] {
            let mut out = Vec::new();
            put_long(&mut out, n);
            let mut pos = 0;
            assert_eq!(get_long(&out, &mut pos).unwrap(), n);
            assert_eq!(pos, out.len());
        }
        let mut out = Vec::new();
        put_long(&mut out, -2);
        assert_eq!(out, [3]);
        assert!(get_long(&[0x80], &mut 0).is_err());
        // ten bytes whose last carries bits past the 64th: refused, not truncated to i64::MAX
        let mut over = vec![0xFF; 9];
        over.push(0x7F);
        assert!(get_long(&over, &mut 0).is_err());
    }

    #[test]
    fn compiles_named_types_and_references() {
        let s = AvroSchema::parse(
            r#"{"type":"record","name":"A","namespace":"n","fields":[
                {"name":"b","type":{"type":"record","name":"B","fields":[{"name":"x","type":"long"}]}},
                {"name":"b2","type":["null","B"],"default":null},
                {"name":"c","type":{"type":"enum","name":"C","symbols":["X","Y"]}},
                {"name":"t","type":{"type":"long","logicalType":"timestamp-millis"}},
                {"name":"m","type":{"type":"map","values":{"type":"array","items":"n.C"}}}]}"#,
        )
        .unwrap();
        assert_eq!(s.root, Node::Record(0));
        let a = &s.records[0];
        assert_eq!(a.fields[0].node, Node::Record(1));
        assert_eq!(a.fields[1].node, Node::Union(vec![Node::Null, Node::Record(1)]));
        assert_eq!(a.fields[1].default, Some(Value::Null));
        assert_eq!(a.fields[2].node, Node::Enum(0));
        assert_eq!(a.fields[3].node, Node::TimestampMillis);
        assert_eq!(
            a.fields[4].node,
            Node::Map(Box::new(Node::Array(Box::new(Node::Enum(0)))))
        );
        assert!(AvroSchema::parse(r#"{"type":"record","name":"A","fields":[{"name":"x","type":"Nope"}]}"#).is_err());
    }
}
