//! `_AvroCodec`: Avro binary and JSON encoding and decoding of Python values against a
//! compiled Avro definition ([`crate::protocol::avro`]), so `AvroSchema` and `JsonSchema`
//! encode and decode a message in one call without a Python-level walk.
//!
//! Values: records from dicts or any object with the fields as attributes (decoded through the
//! record's constructor, or to dicts); enums from members or symbol names (decoded through
//! the enum's constructor, or to names); `timestamp-millis` from datetimes (naive ones are
//! UTC) or ints; `date` from dates or ints. JSON writes bytes in base64. Errors are
//! `ValueError`s naming the field.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyBytes, PyDate, PyDateTime, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::Value;

use super::codec_json::{base64, json_fits, json_to_py, unbase64};
use crate::protocol::avro::{get_long, put_long, take, AvroSchema, Node};

static HELPERS: PyOnceLock<Helpers> = PyOnceLock::new();

/// Python objects the codec needs: `enum.Enum`, the UTC epoch, `timezone.utc`,
/// `timedelta` and `date`.
struct Helpers {
    enum_type: Py<PyAny>,
    epoch: Py<PyAny>,
    utc: Py<PyAny>,
    timedelta: Py<PyAny>,
    date: Py<PyAny>,
}

/// Ordinal of 1970-01-01 (`date(1970, 1, 1).toordinal()`).
const EPOCH_ORDINAL: i64 = 719_163;

fn helpers(py: Python<'_>) -> PyResult<&Helpers> {
    HELPERS.get_or_try_init(py, || {
        let dt = py.import("datetime")?;
        let utc = dt.getattr("timezone")?.getattr("utc")?;
        let kw = PyDict::new(py);
        kw.set_item("tzinfo", &utc)?;
        let epoch = dt.getattr("datetime")?.call((1970, 1, 1), Some(&kw))?;
        Ok(Helpers {
            enum_type: py.import("enum")?.getattr("Enum")?.unbind(),
            epoch: epoch.unbind(),
            utc: utc.unbind(),
            timedelta: dt.getattr("timedelta")?.unbind(),
            date: dt.getattr("date")?.unbind(),
        })
    })
}

fn err(path: &str, what: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("{path}: {what}"))
}

/// A compiled Avro definition with the constructors of its named types.
#[pyclass(name = "_AvroCodec", module = "magnetar._core", frozen)]
pub struct AvroCodec {
    schema: AvroSchema,
    /// Per record (by index): called with the fields as keyword arguments, or None for dicts.
    records: Vec<Option<Py<PyAny>>>,
    /// Per enum (by index): called with the symbol, or None for names.
    enums: Vec<Option<Py<PyAny>>>,
}

#[pymethods]
impl AvroCodec {
    /// `definition`: Avro JSON; `constructors`: record and enum names to callables.
    #[new]
    fn new(definition: &str, constructors: &Bound<'_, PyDict>) -> PyResult<Self> {
        let schema = AvroSchema::parse(definition).map_err(PyValueError::new_err)?;
        let ctor = |name: &str| -> PyResult<Option<Py<PyAny>>> {
            Ok(constructors.get_item(name)?.filter(|c| !c.is_none()).map(Bound::unbind))
        };
        let records = schema.records.iter().map(|r| ctor(&r.name)).collect::<PyResult<_>>()?;
        let enums = schema.enums.iter().map(|e| ctor(&e.name)).collect::<PyResult<_>>()?;
        Ok(AvroCodec { schema, records, enums })
    }

    /// The Avro binary encoding of `value`.
    fn encode<'py>(&self, value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        let mut out = Vec::with_capacity(64);
        self.write(&self.schema.root, value, &mut out, "value")?;
        Ok(PyBytes::new(value.py(), &out))
    }

    /// The value of Avro binary `data`; raises `ValueError` on bad or left-over bytes.
    fn decode(&self, py: Python<'_>, data: &[u8]) -> PyResult<Py<PyAny>> {
        let mut pos = 0;
        let v = self.read(py, &self.schema.root, data, &mut pos)?;
        if pos != data.len() {
            return Err(PyValueError::new_err(format!(
                "{} bytes left over after the Avro datum",
                data.len() - pos
            )));
        }
        Ok(v.unbind())
    }

    /// The JSON encoding of `value` (compact).
    fn encode_json<'py>(&self, value: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
        let v = self.to_json(&self.schema.root, value, "value")?;
        let out = serde_json::to_vec(&v).map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PyBytes::new(value.py(), &out))
    }

    /// Raises `ValueError` unless `data` is one Avro binary datum of the schema (no value is built).
    fn check(&self, data: &[u8]) -> PyResult<()> {
        self.schema.check_binary(data).map_err(PyValueError::new_err)
    }

    /// Raises `ValueError` unless `data` is JSON the schema reads (no value is built).
    fn check_json(&self, data: &[u8]) -> PyResult<()> {
        self.schema.check_json(data).map_err(PyValueError::new_err)
    }

    /// The value of JSON `data`; fields are matched by name, missing ones take their default.
    fn decode_json(&self, py: Python<'_>, data: &[u8]) -> PyResult<Py<PyAny>> {
        let v: Value = serde_json::from_slice(data).map_err(|e| PyValueError::new_err(format!("not JSON: {e}")))?;
        Ok(self.json_value(py, &self.schema.root, &v, "value")?.unbind())
    }
}

fn is_int(v: &Bound<'_, PyAny>) -> bool {
    v.is_instance_of::<PyInt>() && !v.is_instance_of::<PyBool>()
}

fn field<'py>(value: &Bound<'py, PyAny>, name: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
    if let Ok(d) = value.cast::<PyDict>() {
        return d.get_item(name);
    }
    match value.getattr(name) {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyAttributeError>(value.py()) => Ok(None),
        Err(e) => Err(e),
    }
}

fn millis(v: &Bound<'_, PyAny>) -> PyResult<i64> {
    let h = helpers(v.py())?;
    let aware = if v.getattr("tzinfo")?.is_none() {
        let kw = PyDict::new(v.py());
        kw.set_item("tzinfo", h.utc.bind(v.py()))?;
        v.call_method("replace", (), Some(&kw))?
    } else {
        v.clone()
    };
    let d = aware.call_method1("__sub__", (h.epoch.bind(v.py()),))?;
    let (days, secs, us): (i64, i64, i64) = (
        d.getattr("days")?.extract()?,
        d.getattr("seconds")?.extract()?,
        d.getattr("microseconds")?.extract()?,
    );
    Ok((days * 86_400 + secs) * 1000 + us / 1000)
}

fn days(v: &Bound<'_, PyAny>) -> PyResult<i64> {
    Ok(v.call_method0("toordinal")?.extract::<i64>()? - EPOCH_ORDINAL)
}

impl AvroCodec {
    fn matches(&self, node: &Node, v: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(match node {
            Node::Null => v.is_none(),
            Node::Boolean => v.is_instance_of::<PyBool>(),
            Node::Int | Node::Long | Node::TimestampMicros => is_int(v),
            Node::Float | Node::Double => is_int(v) || v.is_instance_of::<PyFloat>(),
            Node::String => v.is_instance_of::<PyString>(),
            Node::Bytes | Node::Fixed(_) | Node::Decimal { .. } => {
                v.is_instance_of::<PyBytes>() || v.cast::<pyo3::types::PyByteArray>().is_ok()
            }
            Node::TimestampMillis => v.is_instance_of::<PyDateTime>() || is_int(v),
            Node::Date => (v.is_instance_of::<PyDate>() && !v.is_instance_of::<PyDateTime>()) || is_int(v),
            Node::Enum(_) => {
                v.is_instance_of::<PyString>() || v.is_instance(helpers(v.py())?.enum_type.bind(v.py()))?
            }
            Node::Array(_) => v.cast::<PyList>().is_ok() || v.cast::<PyTuple>().is_ok(),
            Node::Map(_) => v.cast::<PyDict>().is_ok(),
            Node::Record(_) => {
                !(v.is_none()
                    || v.is_instance_of::<PyString>()
                    || v.is_instance_of::<PyBytes>()
                    || v.is_instance_of::<PyInt>()
                    || v.is_instance_of::<PyFloat>()
                    || v.cast::<PyList>().is_ok())
            }
            Node::Union(_) => false,
        })
    }

    fn symbol(&self, idx: usize, v: &Bound<'_, PyAny>, path: &str) -> PyResult<(usize, String)> {
        let s: String = if v.is_instance_of::<PyString>() {
            v.extract()?
        } else {
            v.getattr("name")?.extract()?
        };
        let symbols = &self.schema.enums[idx].symbols;
        match symbols.iter().position(|x| *x == s) {
            Some(i) => Ok((i, s)),
            None => Err(err(path, format!("{s:?} is not one of {symbols:?}"))),
        }
    }

    fn write(&self, node: &Node, v: &Bound<'_, PyAny>, out: &mut Vec<u8>, path: &str) -> PyResult<()> {
        if let Node::Union(branches) = node {
            for (i, b) in branches.iter().enumerate() {
                if self.matches(b, v)? {
                    put_long(out, i as i64);
                    return self.write(b, v, out, path);
                }
            }
            return Err(err(path, format!("{} fits no branch of the union", v.repr()?)));
        }
        if !self.matches(node, v)? {
            return Err(err(path, format!("{} does not fit {node:?}", v.repr()?)));
        }
        match node {
            Node::Null => {}
            Node::Boolean => out.push(v.is_truthy()? as u8),
            Node::Int => {
                let n: i32 = v.extract().map_err(|_| err(path, "out of range for an Avro int"))?;
                put_long(out, n.into());
            }
            Node::Long | Node::TimestampMicros => put_long(
                out,
                v.extract().map_err(|_| err(path, "out of range for an Avro long"))?,
            ),
            Node::Float => out.extend_from_slice(&(v.extract::<f64>()? as f32).to_le_bytes()),
            Node::Double => out.extend_from_slice(&v.extract::<f64>()?.to_le_bytes()),
            Node::String => {
                let s = v.cast::<PyString>()?.to_str()?;
                put_long(out, s.len() as i64);
                out.extend_from_slice(s.as_bytes());
            }
            Node::Bytes | Node::Fixed(_) | Node::Decimal { .. } => {
                let b: Vec<u8> = v.extract()?;
                match node {
                    Node::Fixed(n) | Node::Decimal { fixed: Some(n), .. } if b.len() != *n => {
                        return Err(err(path, format!("expected {n} bytes")))
                    }
                    Node::Fixed(_) | Node::Decimal { fixed: Some(_), .. } => {}
                    _ => put_long(out, b.len() as i64),
                }
                out.extend_from_slice(&b);
            }
            Node::TimestampMillis => put_long(out, if is_int(v) { v.extract()? } else { millis(v)? }),
            Node::Date => put_long(out, if is_int(v) { v.extract()? } else { days(v)? }),
            Node::Enum(idx) => put_long(out, self.symbol(*idx, v, path)?.0 as i64),
            Node::Array(item) => {
                let n = v.len()?;
                if n > 0 {
                    put_long(out, n as i64);
                    for (i, x) in v.try_iter()?.enumerate() {
                        self.write(item, &x?, out, &format!("{path}[{i}]"))?;
                    }
                }
                out.push(0);
            }
            Node::Map(values) => {
                let d = v.cast::<PyDict>()?;
                if !d.is_empty() {
                    put_long(out, d.len() as i64);
                    for (k, x) in d.iter() {
                        let k = k.cast::<PyString>().map_err(|_| err(path, "map keys must be str"))?;
                        let k = k.to_str()?;
                        put_long(out, k.len() as i64);
                        out.extend_from_slice(k.as_bytes());
                        self.write(values, &x, out, &format!("{path}[{k:?}]"))?;
                    }
                }
                out.push(0);
            }
            Node::Record(idx) => {
                for f in &self.schema.records[*idx].fields {
                    let fpath = format!("{path}.{}", f.name);
                    match (field(v, &f.name)?, &f.default) {
                        (Some(x), _) => self.write(&f.node, &x, out, &fpath)?,
                        (None, Some(d)) => self.write(&f.node, &json_to_py(v.py(), d)?, out, &fpath)?,
                        (None, None) => return Err(err(&fpath, "missing")),
                    }
                }
            }
            Node::Union(_) => unreachable!("handled above"),
        }
        Ok(())
    }

    fn read<'py>(&self, py: Python<'py>, node: &Node, data: &[u8], pos: &mut usize) -> PyResult<Bound<'py, PyAny>> {
        let bad = |e: String| PyValueError::new_err(e);
        Ok(match node {
            Node::Null => py.None().into_bound(py),
            Node::Boolean => match take(data, pos, 1).map_err(bad)?[0] {
                b @ (0 | 1) => PyBool::new(py, b == 1).to_owned().into_any(),
                b => return Err(bad(format!("bad boolean byte {b}"))),
            },
            Node::Int | Node::Long | Node::TimestampMicros => {
                get_long(data, pos).map_err(bad)?.into_pyobject(py)?.into_any()
            }
            Node::Float => {
                let b: [u8; 4] = take(data, pos, 4).map_err(bad)?.try_into().expect("4 bytes");
                f64::from(f32::from_le_bytes(b)).into_pyobject(py)?.into_any()
            }
            Node::Double => {
                let b: [u8; 8] = take(data, pos, 8).map_err(bad)?.try_into().expect("8 bytes");
                f64::from_le_bytes(b).into_pyobject(py)?.into_any()
            }
            Node::String => {
                let n = get_long(data, pos).map_err(bad)?;
                let b = take(
                    data,
                    pos,
                    usize::try_from(n).map_err(|_| bad("negative length".into()))?,
                )
                .map_err(bad)?;
                PyString::new(py, std::str::from_utf8(b).map_err(|e| bad(e.to_string()))?).into_any()
            }
            Node::Bytes | Node::Decimal { fixed: None, .. } => {
                let n = get_long(data, pos).map_err(bad)?;
                PyBytes::new(
                    py,
                    take(
                        data,
                        pos,
                        usize::try_from(n).map_err(|_| bad("negative length".into()))?,
                    )
                    .map_err(bad)?,
                )
                .into_any()
            }
            Node::Fixed(n) | Node::Decimal { fixed: Some(n), .. } => {
                PyBytes::new(py, take(data, pos, *n).map_err(bad)?).into_any()
            }
            Node::TimestampMillis => self.timestamp(py, get_long(data, pos).map_err(bad)?)?,
            Node::Date => self.date(py, get_long(data, pos).map_err(bad)?)?,
            Node::Enum(idx) => {
                let i = get_long(data, pos).map_err(bad)?;
                let sym = usize::try_from(i)
                    .ok()
                    .and_then(|i| self.schema.enums[*idx].symbols.get(i))
                    .ok_or_else(|| bad(format!("enum index {i} out of range")))?;
                self.enum_value(py, *idx, sym)?
            }
            Node::Array(item) => {
                let list = PyList::empty(py);
                for_each_item(data, pos, |pos| list.append(self.read(py, item, data, pos)?))?;
                list.into_any()
            }
            Node::Map(values) => {
                let d = PyDict::new(py);
                for_each_item(data, pos, |pos| {
                    let k = self.read(py, &Node::String, data, pos)?;
                    d.set_item(k, self.read(py, values, data, pos)?)
                })?;
                d.into_any()
            }
            Node::Union(branches) => {
                let i = get_long(data, pos).map_err(bad)?;
                let b = usize::try_from(i)
                    .ok()
                    .and_then(|i| branches.get(i))
                    .ok_or_else(|| bad(format!("union branch {i} out of range")))?;
                self.read(py, b, data, pos)?
            }
            Node::Record(idx) => {
                let d = PyDict::new(py);
                for f in &self.schema.records[*idx].fields {
                    d.set_item(&f.name, self.read(py, &f.node, data, pos)?)?;
                }
                self.record_value(*idx, d)?
            }
        })
    }

    fn timestamp<'py>(&self, py: Python<'py>, ms: i64) -> PyResult<Bound<'py, PyAny>> {
        let h = helpers(py)?;
        let kw = PyDict::new(py);
        kw.set_item("milliseconds", ms)?;
        let delta = h.timedelta.bind(py).call((), Some(&kw))?;
        h.epoch.bind(py).call_method1("__add__", (delta,))
    }

    fn date<'py>(&self, py: Python<'py>, days: i64) -> PyResult<Bound<'py, PyAny>> {
        helpers(py)?
            .date
            .bind(py)
            .call_method1("fromordinal", (days + EPOCH_ORDINAL,))
    }

    fn enum_value<'py>(&self, py: Python<'py>, idx: usize, symbol: &str) -> PyResult<Bound<'py, PyAny>> {
        match &self.enums[idx] {
            Some(c) => c.bind(py).call1((symbol,)),
            None => Ok(PyString::new(py, symbol).into_any()),
        }
    }

    fn record_value<'py>(&self, idx: usize, fields: Bound<'py, PyDict>) -> PyResult<Bound<'py, PyAny>> {
        match &self.records[idx] {
            Some(c) => c.bind(fields.py()).call((), Some(&fields)),
            None => Ok(fields.into_any()),
        }
    }

    fn to_json(&self, node: &Node, v: &Bound<'_, PyAny>, path: &str) -> PyResult<Value> {
        if let Node::Union(branches) = node {
            for b in branches {
                if self.matches(b, v)? {
                    return self.to_json(b, v, path);
                }
            }
            return Err(err(path, format!("{} fits no branch of the union", v.repr()?)));
        }
        if !self.matches(node, v)? {
            return Err(err(path, format!("{} does not fit {node:?}", v.repr()?)));
        }
        Ok(match node {
            Node::Null => Value::Null,
            Node::Boolean => Value::Bool(v.is_truthy()?),
            Node::Int | Node::Long | Node::TimestampMicros => {
                let n: i64 = v.extract().map_err(|_| err(path, "out of range"))?;
                if matches!(node, Node::Int) && i32::try_from(n).is_err() {
                    return Err(err(path, "out of range for an Avro int"));
                }
                Value::from(n)
            }
            Node::Float | Node::Double => {
                let f: f64 = v.extract()?;
                serde_json::Number::from_f64(f)
                    .map(Value::Number)
                    .ok_or_else(|| err(path, "not a finite number"))?
            }
            Node::String => Value::String(v.extract()?),
            Node::Bytes | Node::Fixed(_) | Node::Decimal { .. } => Value::String(base64(&v.extract::<Vec<u8>>()?)),
            Node::TimestampMillis => Value::from(if is_int(v) { v.extract()? } else { millis(v)? }),
            Node::Date => Value::from(if is_int(v) { v.extract()? } else { days(v)? }),
            Node::Enum(idx) => Value::String(self.symbol(*idx, v, path)?.1),
            Node::Array(item) => Value::Array(
                v.try_iter()?
                    .enumerate()
                    .map(|(i, x)| self.to_json(item, &x?, &format!("{path}[{i}]")))
                    .collect::<PyResult<_>>()?,
            ),
            Node::Map(values) => {
                let mut m = serde_json::Map::new();
                for (k, x) in v.cast::<PyDict>()?.iter() {
                    let k: String = k.extract().map_err(|_| err(path, "map keys must be str"))?;
                    let x = self.to_json(values, &x, &format!("{path}[{k:?}]"))?;
                    m.insert(k, x);
                }
                Value::Object(m)
            }
            Node::Record(idx) => {
                let mut m = serde_json::Map::new();
                for f in &self.schema.records[*idx].fields {
                    let fpath = format!("{path}.{}", f.name);
                    let x = match (field(v, &f.name)?, &f.default) {
                        (Some(x), _) => self.to_json(&f.node, &x, &fpath)?,
                        (None, Some(d)) => d.clone(),
                        (None, None) => return Err(err(&fpath, "missing")),
                    };
                    m.insert(f.name.clone(), x);
                }
                Value::Object(m)
            }
            Node::Union(_) => unreachable!("handled above"),
        })
    }

    fn json_value<'py>(&self, py: Python<'py>, node: &Node, v: &Value, path: &str) -> PyResult<Bound<'py, PyAny>> {
        let wrong = || err(path, format!("{v} does not fit {node:?}"));
        Ok(match (node, v) {
            (Node::Union(branches), _) => {
                if v.is_null() && branches.contains(&Node::Null) {
                    return Ok(py.None().into_bound(py));
                }
                let b = branches
                    .iter()
                    .find(|b| json_fits(b, v))
                    .ok_or_else(|| err(path, format!("{v} fits no branch of the union")))?;
                self.json_value(py, b, v, path)?
            }
            (Node::Null, Value::Null) => py.None().into_bound(py),
            (Node::Boolean, Value::Bool(b)) => PyBool::new(py, *b).to_owned().into_any(),
            (Node::Int | Node::Long | Node::TimestampMicros, Value::Number(n)) => {
                n.as_i64().ok_or_else(wrong)?.into_pyobject(py)?.into_any()
            }
            (Node::Float | Node::Double, Value::Number(n)) => {
                n.as_f64().ok_or_else(wrong)?.into_pyobject(py)?.into_any()
            }
            (Node::String, Value::String(s)) => PyString::new(py, s).into_any(),
            (Node::Bytes | Node::Fixed(_) | Node::Decimal { .. }, Value::String(s)) => {
                PyBytes::new(py, &unbase64(s).ok_or_else(|| err(path, "bad base64"))?).into_any()
            }
            (Node::TimestampMillis, Value::Number(n)) => self.timestamp(py, n.as_i64().ok_or_else(wrong)?)?,
            (Node::Date, Value::Number(n)) => self.date(py, n.as_i64().ok_or_else(wrong)?)?,
            (Node::Enum(idx), Value::String(s)) => {
                if !self.schema.enums[*idx].symbols.contains(s) {
                    return Err(err(path, format!("{s:?} is not a symbol")));
                }
                self.enum_value(py, *idx, s)?
            }
            (Node::Array(item), Value::Array(a)) => PyList::new(
                py,
                a.iter()
                    .enumerate()
                    .map(|(i, x)| self.json_value(py, item, x, &format!("{path}[{i}]")))
                    .collect::<PyResult<Vec<_>>>()?,
            )?
            .into_any(),
            (Node::Map(values), Value::Object(o)) => {
                let d = PyDict::new(py);
                for (k, x) in o {
                    d.set_item(k, self.json_value(py, values, x, &format!("{path}[{k:?}]"))?)?;
                }
                d.into_any()
            }
            (Node::Record(idx), Value::Object(o)) => {
                let d = PyDict::new(py);
                for f in &self.schema.records[*idx].fields {
                    let fpath = format!("{path}.{}", f.name);
                    let x = match (o.get(&f.name), &f.default) {
                        (Some(x), _) | (None, Some(x)) => self.json_value(py, &f.node, x, &fpath)?,
                        (None, None) => return Err(err(&fpath, "missing and without a default")),
                    };
                    d.set_item(&f.name, x)?;
                }
                self.record_value(*idx, d)?
            }
            _ => return Err(wrong()),
        })
    }
}

/// Reads the items of an Avro array or map: blocks of a count followed by that many items, up
/// to a zero count. A negative count is followed by the block's size in bytes, which decoding
/// item by item does not need.
fn for_each_item(data: &[u8], pos: &mut usize, mut item: impl FnMut(&mut usize) -> PyResult<()>) -> PyResult<()> {
    loop {
        let count = get_long(data, pos).map_err(PyValueError::new_err)?;
        if count == 0 {
            return Ok(());
        }
        if count < 0 {
            get_long(data, pos).map_err(PyValueError::new_err)?;
        }
        for _ in 0..count.unsigned_abs() {
            item(pos)?;
        }
    }
}
