//! Filling the columns from Avro binary: a datum of the writer's type resolved to the
//! reader's, union members picked as Avro resolution picks them, and the blocks of arrays and
//! maps read with a bound on items of no bytes ([`Input`]).

use super::{decimal, micros, node_kind, not_null, offset, shape, unscaled, Col, StructCol};
use crate::protocol::avro::{get_long, take, AvroSchema, Node, Record};

impl StructCol {
    /// The member a writer's datum of type `node` goes to: the first whose type is the
    /// writer's, else the first the writer's type promotes to (the Avro resolution of a union).
    fn member(&self, w: &AvroSchema, node: &Node) -> Result<usize, String> {
        let writer = shape(w, node);
        let promoted: &[&str] = match writer.as_str() {
            "int" => &["long", "float", "double"],
            "long" => &["float", "double"],
            "float" => &["double"],
            "string" => &["bytes"],
            "bytes" => &["string"],
            _ => &[],
        };
        self.shapes
            .iter()
            .position(|s| *s == writer)
            .or_else(|| self.shapes.iter().position(|s| promoted.contains(&s.as_str())))
            .ok_or_else(|| format!("the writer's {writer} is no member of the reader's union"))
    }

    /// A writer's record, resolved to these fields by name.
    fn avro(&mut self, w: &AvroSchema, rec: &Record, r: &mut Input) -> Result<(), String> {
        for (i, f) in rec.fields.iter().enumerate() {
            let at = match self.fields.get(i) {
                Some(x) if *x.name() == f.name => Some(i),
                _ => self.fields.iter().position(|x| *x.name() == f.name),
            };
            match at {
                Some(j) => self.cols[j]
                    .avro(w, &f.node, r)
                    .and_then(|null| not_null(null, self.fields[j].is_nullable()))
                    .map_err(|e| format!("{}: {e}", f.name))?,
                None => w
                    .skip(&f.node, r.d, &mut r.pos)
                    .map_err(|e| format!("{}: {e}", f.name))?,
            }
        }
        self.complete_row()
    }
}

impl Col {
    /// One Avro binary datum of the writer's type `node` (schema `w`) at `r`; true when it
    /// was null (which the parent refuses where its type holds none).
    pub(in crate::columnar) fn avro(&mut self, w: &AvroSchema, node: &Node, r: &mut Input) -> Result<bool, String> {
        if let Node::Union(branches) = node {
            let i = get_long(r.d, &mut r.pos)?;
            let branch = usize::try_from(i)
                .ok()
                .and_then(|i| branches.get(i))
                .ok_or_else(|| format!("union index {i} out of range"))?;
            return self.avro(w, branch, r);
        }
        if *node == Node::Null {
            self.null();
            return Ok(true);
        }
        if let Col::Members(m) = self {
            let k = m.member(w, node)?;
            return m.set_member(k, |c| c.avro(w, node, r));
        }
        let (d, pos) = (r.d, &mut r.pos);
        let len = |pos: &mut usize| -> Result<usize, String> {
            usize::try_from(get_long(d, pos)?).map_err(|_| "negative length".to_string())
        };
        match (&mut *self, node) {
            (Col::Bool(b), Node::Boolean) => match take(d, pos, 1)?[0] {
                v @ (0 | 1) => b.append_value(v == 1),
                v => return Err(format!("bad boolean byte {v}")),
            },
            (Col::I32(b), Node::Int | Node::Date) => {
                let n = get_long(d, pos)?;
                b.append_value(i32::try_from(n).map_err(|_| format!("{n} out of range for an int"))?);
            }
            (Col::Date(b), Node::Int | Node::Date) => {
                let n = get_long(d, pos)?;
                b.append_value(i32::try_from(n).map_err(|_| format!("{n} out of range for a date"))?);
            }
            (Col::I64(b), Node::Int | Node::Long | Node::TimestampMillis | Node::TimestampMicros) => {
                b.append_value(integer(node, d, pos)?)
            }
            (Col::Ts(b, _), Node::TimestampMillis) => b.append_value(micros(get_long(d, pos)?, 1000)?),
            (Col::Ts(b, _), Node::TimestampMicros) => b.append_value(get_long(d, pos)?),
            // A plain long (or int) is in the reader's unit: the logical type is the reader's.
            (Col::Ts(b, unit), Node::Int | Node::Long) => b.append_value(micros(integer(node, d, pos)?, *unit)?),
            (Col::F32(b), Node::Int | Node::Long) => b.append_value(integer(node, d, pos)? as f32),
            (Col::F32(b), Node::Float) => b.append_value(f32::from_le_bytes(array4(take(d, pos, 4)?))),
            (Col::F64(b), Node::Int | Node::Long) => b.append_value(integer(node, d, pos)? as f64),
            (Col::F64(b), Node::Float) => b.append_value(f64::from(f32::from_le_bytes(array4(take(d, pos, 4)?)))),
            (Col::F64(b), Node::Double) => {
                let bytes: [u8; 8] = take(d, pos, 8)?.try_into().map_err(|_| "truncated double")?;
                b.append_value(f64::from_le_bytes(bytes));
            }
            (Col::Str(b), Node::String | Node::Bytes) => {
                let n = len(pos)?;
                b.append_value(
                    std::str::from_utf8(take(d, pos, n)?).map_err(|e| format!("a string that is not UTF-8: {e}"))?,
                );
            }
            (Col::Str(b), Node::Enum(e)) => {
                let i = get_long(d, pos)?;
                let symbols = &w.enums[*e].symbols;
                let s = usize::try_from(i)
                    .ok()
                    .and_then(|i| symbols.get(i))
                    .ok_or_else(|| format!("enum index {i} out of range"))?;
                b.append_value(s);
            }
            (Col::Bin(b), Node::Bytes | Node::String | Node::Decimal { fixed: None, .. }) => {
                let n = len(pos)?;
                b.append_value(take(d, pos, n)?);
            }
            (Col::Bin(b), Node::Fixed(n) | Node::Decimal { fixed: Some(n), .. }) => b.append_value(take(d, pos, *n)?),
            (Col::Dec(b, scale, precision), Node::Decimal { scale: ws, fixed, .. }) => {
                if ws != scale {
                    return Err(format!("a decimal of scale {ws} read as scale {scale}"));
                }
                let n = match fixed {
                    Some(n) => *n,
                    None => len(pos)?,
                };
                b.append_value(decimal(unscaled(take(d, pos, n)?)?, *precision)?);
            }
            // Plain bytes or fixed read as the reader's decimal (its logical type decides).
            (Col::Dec(b, _, precision), Node::Bytes | Node::Fixed(_)) => {
                let n = match node {
                    Node::Fixed(n) => *n,
                    _ => len(pos)?,
                };
                b.append_value(decimal(unscaled(take(d, pos, n)?)?, *precision)?);
            }
            (Col::Struct(c), Node::Record(i)) => c.avro(w, &w.records[*i], r)?,
            (Col::List(c), Node::Array(item)) => {
                let start = c.offsets.last().copied().unwrap_or(0) as usize;
                let nullable = c.field.is_nullable();
                let n = blocks(r, |r| not_null(c.item.avro(w, item, r)?, nullable))?;
                c.offsets.push(offset(start + n)?);
                c.nulls.append_non_null();
            }
            (Col::Map(c), Node::Map(values)) => {
                let start = c.offsets.last().copied().unwrap_or(0) as usize;
                let n = blocks(r, |r| {
                    let k = usize::try_from(get_long(r.d, &mut r.pos)?).map_err(|_| "negative length")?;
                    c.keys.append_value(
                        std::str::from_utf8(take(r.d, &mut r.pos, k)?).map_err(|_| "a map key that is not UTF-8")?,
                    );
                    not_null(c.values.avro(w, values, r)?, c.nullable)
                })?;
                c.offsets.push(offset(start + n)?);
                c.nulls.append_non_null();
            }
            (col, node) => {
                return Err(format!(
                    "the writer's {} does not resolve to the reader's {}",
                    node_kind(node),
                    col.kind()
                ))
            }
        }
        Ok(false)
    }
}

/// A writer's `int` or `long` read wider: an `int` must be in the int range even then (the
/// varint of a long there is malformed data, not a wider value).
fn integer(node: &Node, d: &[u8], pos: &mut usize) -> Result<i64, String> {
    let n = get_long(d, pos)?;
    if matches!(node, Node::Int | Node::Date) && i32::try_from(n).is_err() {
        return Err(format!("{n} out of range for an int"));
    }
    Ok(n)
}

fn array4(b: &[u8]) -> [u8; 4] {
    let mut out = [0; 4];
    out.copy_from_slice(&b[..4]);
    out
}

/// An Avro datum being read: its bytes, the position, and how many more items of no bytes
/// (nulls, records of nothing) its arrays and maps may hold. Such an item costs a row however
/// few bytes say how many there are, so a count of 2^62 of them must be refused, not built.
pub(in crate::columnar) struct Input<'a> {
    pub(in crate::columnar) d: &'a [u8],
    pub(in crate::columnar) pos: usize,
    empty: usize,
}

/// Items of no bytes one payload may hold, in all its arrays and maps together.
pub(in crate::columnar) const MAX_EMPTY_ITEMS: usize = 1 << 20;

impl<'a> Input<'a> {
    pub(in crate::columnar) fn new(d: &'a [u8]) -> Input<'a> {
        Input {
            d,
            pos: 0,
            empty: MAX_EMPTY_ITEMS,
        }
    }
}

/// Reads the blocks of an Avro array or map, calling `item` once per item: how many there were.
fn blocks(r: &mut Input, mut item: impl FnMut(&mut Input) -> Result<(), String>) -> Result<usize, String> {
    let mut count = 0usize;
    loop {
        let n = get_long(r.d, &mut r.pos)?;
        if n == 0 {
            return Ok(count);
        }
        if n < 0 {
            get_long(r.d, &mut r.pos)?; // the block's size in bytes
        }
        let n = usize::try_from(n.unsigned_abs()).map_err(|_| "bad block count")?;
        for i in 0..n {
            let before = r.pos;
            item(r)?;
            // An item of no bytes says every item of its type has none: the rest of the block
            // must fit what is left of the allowance before any is built.
            if r.pos == before {
                let rest = n - i;
                if rest > r.empty {
                    return Err(format!(
                        "{n} items of no bytes: more than the {MAX_EMPTY_ITEMS} one payload may hold"
                    ));
                }
                r.empty -= rest;
                for _ in 1..rest {
                    item(r)?;
                }
                break;
            }
        }
        count += n;
    }
}
