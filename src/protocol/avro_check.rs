//! Whether a payload is a datum of a compiled Avro schema, without building its value: what
//! an AUTO_PRODUCE producer checks before it sends bytes to a topic with an Avro or JSON
//! schema. Binary data must be exactly one datum (no bytes left over); JSON must be a value
//! the schema can read (fields by name, missing ones need a default, extra ones are ignored,
//! as the readers of both encodings do).

use serde_json::Value;

use super::avro::{get_long, take, AvroSchema, Node};

/// How deep a datum may nest in [`AvroSchema::skip`]: far more than any schema a person writes
/// spells out, and a small part of a 2 MiB thread stack.
pub const MAX_DEPTH: usize = 500;

impl AvroSchema {
    /// `Ok` when `data` is one Avro binary datum of this schema.
    pub fn check_binary(&self, data: &[u8]) -> Result<(), String> {
        let mut pos = 0;
        self.skip(&self.root, data, &mut pos)?;
        if pos != data.len() {
            return Err(format!("{} bytes left over after the Avro datum", data.len() - pos));
        }
        Ok(())
    }

    /// `Ok` when `data` is JSON this schema reads.
    pub fn check_json(&self, data: &[u8]) -> Result<(), String> {
        let v: Value = serde_json::from_slice(data).map_err(|e| format!("not JSON: {e}"))?;
        self.fits(&self.root, &v, "value")
    }

    /// Moves `*pos` over one datum of `node`, checking it as it goes.
    pub(crate) fn skip(&self, node: &Node, data: &[u8], pos: &mut usize) -> Result<(), String> {
        self.skip_at(node, data, pos, 0)
    }

    /// `depth`: the nested types entered so far. A recursive schema (a linked list) nests as
    /// deep as the payload says, so a hostile one would overflow the stack without a limit.
    fn skip_at(&self, node: &Node, data: &[u8], pos: &mut usize, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!("a datum nested more than {MAX_DEPTH} deep"));
        }
        let skip = |node: &Node, pos: &mut usize| self.skip_at(node, data, pos, depth + 1);
        let len = |data: &[u8], pos: &mut usize| -> Result<usize, String> {
            usize::try_from(get_long(data, pos)?).map_err(|_| "negative length".to_string())
        };
        match node {
            Node::Null => {}
            Node::Boolean => match take(data, pos, 1)?[0] {
                0 | 1 => {}
                b => return Err(format!("bad boolean byte {b}")),
            },
            Node::Int | Node::Date => {
                let n = get_long(data, pos)?;
                i32::try_from(n).map_err(|_| format!("{n} out of range for an Avro int"))?;
            }
            Node::Long | Node::TimestampMillis | Node::TimestampMicros => {
                get_long(data, pos)?;
            }
            Node::Float => {
                take(data, pos, 4)?;
            }
            Node::Double => {
                take(data, pos, 8)?;
            }
            Node::String => {
                let n = len(data, pos)?;
                std::str::from_utf8(take(data, pos, n)?).map_err(|e| format!("a string that is not UTF-8: {e}"))?;
            }
            Node::Bytes | Node::Decimal { fixed: None, .. } => {
                let n = len(data, pos)?;
                take(data, pos, n)?;
            }
            Node::Fixed(n) | Node::Decimal { fixed: Some(n), .. } => {
                take(data, pos, *n)?;
            }
            Node::Enum(idx) => {
                let i = get_long(data, pos)?;
                if usize::try_from(i).map_or(true, |i| i >= self.enums[*idx].symbols.len()) {
                    return Err(format!("enum index {i} out of range"));
                }
            }
            Node::Array(item) => self.blocks(data, pos, |pos| skip(item, pos))?,
            Node::Map(values) => self.blocks(data, pos, |pos| {
                skip(&Node::String, pos)?;
                skip(values, pos)
            })?,
            Node::Union(branches) => {
                let i = get_long(data, pos)?;
                let b = usize::try_from(i)
                    .ok()
                    .and_then(|i| branches.get(i))
                    .ok_or_else(|| format!("union branch {i} out of range"))?;
                skip(b, pos)?;
            }
            Node::Record(idx) => {
                for f in &self.records[*idx].fields {
                    skip(&f.node, pos).map_err(|e| format!("{}: {e}", f.name))?;
                }
            }
        }
        Ok(())
    }

    /// The blocks of an array or map: a count and that many items, up to a zero count; a
    /// negative count is followed by the block's size in bytes.
    fn blocks(
        &self,
        data: &[u8],
        pos: &mut usize,
        mut item: impl FnMut(&mut usize) -> Result<(), String>,
    ) -> Result<(), String> {
        loop {
            let count = get_long(data, pos)?;
            if count == 0 {
                return Ok(());
            }
            if count < 0 {
                get_long(data, pos)?;
            }
            for _ in 0..count.unsigned_abs() {
                let before = *pos;
                item(pos)?;
                // An item of no bytes (a null, an empty record) says every item of its type
                // has none: a huge count must not cost time.
                if *pos == before {
                    break;
                }
            }
        }
    }

    fn fits(&self, node: &Node, v: &Value, path: &str) -> Result<(), String> {
        let wrong = || Err(format!("{path}: {v} does not fit {node:?}"));
        match (node, v) {
            (Node::Union(branches), _) => {
                if branches.iter().any(|b| self.fits(b, v, path).is_ok()) {
                    return Ok(());
                }
                return Err(format!("{path}: {v} fits no branch of the union"));
            }
            (Node::Null, Value::Null) | (Node::Boolean, Value::Bool(_)) => {}
            (Node::Int | Node::Date, Value::Number(n)) => {
                if n.as_i64().and_then(|n| i32::try_from(n).ok()).is_none() {
                    return wrong();
                }
            }
            (Node::Long | Node::TimestampMillis | Node::TimestampMicros, Value::Number(n)) => {
                if !n.is_i64() {
                    return wrong();
                }
            }
            (Node::Float | Node::Double, Value::Number(_)) => {}
            (Node::String | Node::Bytes | Node::Fixed(_) | Node::Decimal { .. }, Value::String(_)) => {}
            (Node::Decimal { .. }, Value::Number(_)) => {}
            (Node::Enum(idx), Value::String(s)) => {
                if !self.enums[*idx].symbols.contains(s) {
                    return Err(format!("{path}: {s:?} is not a symbol of the enum"));
                }
            }
            (Node::Array(item), Value::Array(a)) => {
                for (i, x) in a.iter().enumerate() {
                    self.fits(item, x, &format!("{path}[{i}]"))?;
                }
            }
            (Node::Map(values), Value::Object(o)) => {
                for (k, x) in o {
                    self.fits(values, x, &format!("{path}[{k:?}]"))?;
                }
            }
            (Node::Record(idx), Value::Object(o)) => {
                for f in &self.records[*idx].fields {
                    let fpath = format!("{path}.{}", f.name);
                    match (o.get(&f.name), &f.default) {
                        (Some(x), _) => self.fits(&f.node, x, &fpath)?,
                        (None, Some(_)) => {}
                        (None, None) => return Err(format!("{fpath}: missing and without a default")),
                    }
                }
            }
            _ => return wrong(),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::avro::put_long;

    fn order() -> AvroSchema {
        AvroSchema::parse(
            r#"{"type":"record","name":"Order","fields":[
                {"name":"id","type":"long"},
                {"name":"tags","type":{"type":"array","items":"string"}},
                {"name":"kind","type":{"type":"enum","name":"K","symbols":["A","B"]}},
                {"name":"note","type":["null","string"],"default":null}]}"#,
        )
        .unwrap()
    }

    fn datum(id: i64, tags: &[&str], kind: i64, note: Option<&str>) -> Vec<u8> {
        let mut out = Vec::new();
        put_long(&mut out, id);
        if !tags.is_empty() {
            put_long(&mut out, tags.len() as i64);
            for t in tags {
                put_long(&mut out, t.len() as i64);
                out.extend_from_slice(t.as_bytes());
            }
        }
        out.push(0);
        put_long(&mut out, kind);
        match note {
            None => put_long(&mut out, 0),
            Some(n) => {
                put_long(&mut out, 1);
                put_long(&mut out, n.len() as i64);
                out.extend_from_slice(n.as_bytes());
            }
        }
        out
    }

    #[test]
    fn binary_datums_are_checked_whole() {
        let s = order();
        assert!(s.check_binary(&datum(7, &["x", "yz"], 1, Some("n"))).is_ok());
        assert!(s.check_binary(&datum(7, &[], 0, None)).is_ok());
        let mut extra = datum(7, &[], 0, None);
        extra.push(0);
        assert!(s.check_binary(&extra).unwrap_err().contains("left over"));
        let good = datum(7, &["x"], 0, Some("n"));
        assert!(s.check_binary(&good[..good.len() - 1]).is_err());
        assert!(s
            .check_binary(&datum(7, &[], 2, None))
            .unwrap_err()
            .contains("enum index"));
        assert!(s.check_binary(b"not avro at all").is_err());
        assert!(s.check_binary(b"").is_err());
        let mut bad_utf8 = Vec::new();
        put_long(&mut bad_utf8, 1);
        put_long(&mut bad_utf8, 1);
        put_long(&mut bad_utf8, 1);
        bad_utf8.push(0xff);
        bad_utf8.extend_from_slice(&[0, 0, 0]);
        assert!(s.check_binary(&bad_utf8).unwrap_err().contains("UTF-8"));
    }

    #[test]
    fn json_is_checked_against_the_fields() {
        let s = order();
        assert!(s
            .check_json(br#"{"id":1,"tags":["a"],"kind":"B","note":null,"extra":3}"#)
            .is_ok());
        assert!(s.check_json(br#"{"id":1,"tags":[],"kind":"A"}"#).is_ok());
        assert!(s.check_json(br#"{"id":1,"tags":[],"kind":"A","note":"x"}"#).is_ok());
        assert!(s
            .check_json(br#"{"tags":[],"kind":"A"}"#)
            .unwrap_err()
            .contains("value.id: missing"));
        assert!(s.check_json(br#"{"id":"1","tags":[],"kind":"A"}"#).is_err());
        assert!(s.check_json(br#"{"id":1,"tags":[],"kind":"C"}"#).is_err());
        assert!(s.check_json(br#"{"id":1.5,"tags":[],"kind":"A"}"#).is_err());
        assert!(s
            .check_json(br#"{"id":1,"tags":[2],"kind":"A"}"#)
            .unwrap_err()
            .contains("tags[0]"));
        assert!(s.check_json(b"[1,2]").is_err());
        assert!(s.check_json(b"{").unwrap_err().contains("not JSON"));
    }
}
