//! Filling the columns from JSON, read as the reader's type: a JSON payload, or an Avro
//! field's default (whose bytes are written differently, [`Text`]).

use serde_json::Value;

use super::{decimal, micros, not_null, offset, parse_decimal, unscaled, Col, StructCol};

impl StructCol {
    /// The member a JSON value goes to: the first whose type takes that kind of value as it
    /// is (an integer an integer type, a string a string), else the first that takes it at all.
    fn json_member(&self, v: &Value) -> Result<usize, String> {
        let strict = |c: &Col| match c {
            Col::Bool(_) => v.is_boolean(),
            Col::I8(_) | Col::I16(_) | Col::I32(_) | Col::I64(_) | Col::Ts(..) | Col::Date(_) => v.is_i64(),
            Col::F32(_) | Col::F64(_) => v.is_f64(),
            Col::Str(_) => v.is_string(),
            Col::Bin(_) | Col::Dec(..) => false,
            Col::Struct(_) | Col::Map(_) => v.is_object(),
            Col::List(_) => v.is_array(),
            Col::Members(_) => true,
        };
        let loose = |c: &Col| match c {
            Col::F32(_) | Col::F64(_) => v.is_number(),
            Col::Bin(_) => v.is_string(),
            Col::Dec(..) => v.is_string() || v.is_number(),
            _ => false,
        };
        self.cols
            .iter()
            .position(strict)
            .or_else(|| self.cols.iter().position(loose))
            .ok_or_else(|| format!("{v} fits no member of the union"))
    }
}

impl Col {
    /// One JSON value, read as the reader's type (fields by name); `text` says how bytes are
    /// written.
    pub(in crate::columnar) fn json(&mut self, v: &Value, text: Text) -> Result<bool, String> {
        if v.is_null() {
            self.null();
            return Ok(true);
        }
        let wrong = |what: &str| format!("{v} is not {what}");
        let int = |v: &Value| v.as_i64().ok_or_else(|| wrong("an integer"));
        let bytes = |v: &Value| -> Result<Vec<u8>, String> {
            let s = v.as_str().ok_or_else(|| wrong("a string of bytes"))?;
            match text {
                Text::Payload => {
                    use base64::Engine as _;
                    base64::engine::general_purpose::STANDARD
                        .decode(s)
                        .map_err(|_| wrong("base64"))
                }
                // The Avro specification's JSON of bytes: one code point of 0 to 255 per byte.
                Text::AvroDefault => s
                    .chars()
                    .map(|c| u8::try_from(c).map_err(|_| wrong("bytes (code points up to 255)")))
                    .collect(),
            }
        };
        match self {
            Col::Bool(b) => b.append_value(v.as_bool().ok_or_else(|| wrong("a boolean"))?),
            Col::I8(b) => b.append_value(i8::try_from(int(v)?).map_err(|_| wrong("a byte"))?),
            Col::I16(b) => b.append_value(i16::try_from(int(v)?).map_err(|_| wrong("a short"))?),
            Col::I32(b) => b.append_value(i32::try_from(int(v)?).map_err(|_| wrong("an int"))?),
            Col::I64(b) => b.append_value(int(v)?),
            Col::F32(b) => b.append_value(v.as_f64().ok_or_else(|| wrong("a number"))? as f32),
            Col::F64(b) => b.append_value(v.as_f64().ok_or_else(|| wrong("a number"))?),
            Col::Str(b) => b.append_value(v.as_str().ok_or_else(|| wrong("a string"))?),
            Col::Bin(b) => b.append_value(bytes(v)?),
            Col::Ts(b, unit) => b.append_value(micros(int(v)?, *unit)?),
            Col::Date(b) => b.append_value(i32::try_from(int(v)?).map_err(|_| wrong("a date (days)"))?),
            Col::Dec(b, scale, precision) => {
                let n = match (v, text) {
                    (Value::String(_), Text::AvroDefault) => unscaled(&bytes(v)?)?,
                    (Value::String(s), Text::Payload) => parse_decimal(s, *scale).ok_or_else(|| wrong("a decimal"))?,
                    (Value::Number(n), _) => parse_decimal(&n.to_string(), *scale).ok_or_else(|| wrong("a decimal"))?,
                    _ => return Err(wrong("a decimal")),
                };
                b.append_value(decimal(n, *precision)?);
            }
            Col::Struct(c) => {
                let o = v.as_object().ok_or_else(|| wrong("an object"))?;
                for (j, col) in c.cols.iter_mut().enumerate() {
                    if let Some(x) = o.get(c.fields[j].name()) {
                        col.json(x, text)
                            .and_then(|null| not_null(null, c.fields[j].is_nullable()))
                            .map_err(|e| format!("{}: {e}", c.fields[j].name()))?;
                    }
                }
                c.complete_row()?;
            }
            Col::Members(m) => {
                let k = m.json_member(v)?;
                m.set_member(k, |c| c.json(v, text))?;
            }
            Col::List(c) => {
                let items = v.as_array().ok_or_else(|| wrong("an array"))?;
                for x in items {
                    not_null(c.item.json(x, text)?, c.field.is_nullable())?;
                }
                let end = c.offsets.last().copied().unwrap_or(0) as usize + items.len();
                c.offsets.push(offset(end)?);
                c.nulls.append_non_null();
            }
            Col::Map(c) => {
                let o = v.as_object().ok_or_else(|| wrong("an object"))?;
                for (k, x) in o {
                    c.keys.append_value(k);
                    not_null(c.values.json(x, text)?, c.nullable)?;
                }
                let end = c.offsets.last().copied().unwrap_or(0) as usize + o.len();
                c.offsets.push(offset(end)?);
                c.nulls.append_non_null();
            }
        }
        Ok(false)
    }
}

/// How JSON writes bytes: a JSON payload (Jackson's base64), or an Avro field's default (the
/// specification's one code point per byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::columnar) enum Text {
    Payload,
    AvroDefault,
}
