//! Messages as Arrow columns and Arrow columns as messages, for bulk readers and writers such
//! as the Spark data source: the per-row work stays in Rust, and Python sees one
//! `RecordBatch` per call rather than one object per message.
//!
//! - [`read`]: received messages into the columns of a given Arrow schema ([`read::Layout`]).
//! - [`scan`]: which messages of a partition belong to a range of message ids, and whether
//!   the range is complete ([`scan::RangeScan`]).
//! - [`schema_read`]: payloads decoded with the topic's Avro, JSON or primitive schema into
//!   columns ([`schema_read::ValueSchema`]).
//! - [`schema_write`]: rows encoded with the topic's Avro, JSON or primitive schema
//!   ([`schema_write::ValueEncoder`]; the primitives in [`primitive_write`]).
//! - `fuzzing`: the harness of the `schema` fuzzer (docs/fuzzing.md; with the `fuzzing` feature).
//! - [`write`]: the rows of a `RecordBatch` into [`OutgoingMessage`](crate::client::OutgoingMessage)s.
//!
//! Errors are the client layer's ([`crate::client::Error`]); a column of the wrong type is
//! `InvalidConfiguration`. Nothing here knows Python: the Arrow C Data Interface glue lives in
//! `python/arrow.rs`.

#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
pub mod primitive_write;
pub mod read;
pub mod scan;
mod schema_cols;
pub mod schema_read;
pub mod schema_write;
pub mod write;
