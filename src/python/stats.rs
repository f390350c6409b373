//! Client-side statistics as Python dicts: `Producer.stats()`, the `"client"` entry of
//! `Consumer.stats()`, and the connection figures OpenTelemetry reads (`magnetar.telemetry`).
//! The functions that read them off a handle live with that handle, which calls down to here.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use super::fields_dict;
use crate::client::stats::{ClientStats, ConsumerClientStats, HistogramSnapshot, ProducerStats};

/// Milliseconds at the usual quantiles, and the histogram's buckets for exporters.
fn latency<'py>(py: Python<'py>, h: &HistogramSnapshot) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let ms = |us: u64| us as f64 / 1000.0;
    d.set_item("count", h.count)?;
    d.set_item("mean", h.mean_us() / 1000.0)?;
    for (name, q) in [
        ("p50", 0.5),
        ("p90", 0.9),
        ("p95", 0.95),
        ("p99", 0.99),
        ("p999", 0.999),
    ] {
        d.set_item(name, ms(h.quantile_us(q)))?;
    }
    d.set_item("max", ms(h.max_us))?;
    d.set_item("sum", ms(h.sum_us))?;
    let buckets = PyList::empty(py);
    for &(bound, n) in &h.buckets {
        buckets.append((ms(bound), n))?;
    }
    d.set_item("buckets", buckets)?;
    Ok(d)
}

pub fn producer_dict<'py>(py: Python<'py>, s: &ProducerStats) -> PyResult<Bound<'py, PyDict>> {
    let d = fields_dict!(py, s, [pending, sent, sent_bytes, failed]);
    d.set_item("latency_ms", latency(py, &s.latency)?)?;
    d.set_item("receipt_latency_ms", latency(py, &s.receipt_latency)?)?;
    Ok(d)
}

pub fn consumer_dict<'py>(py: Python<'py>, s: &ConsumerClientStats) -> PyResult<Bound<'py, PyDict>> {
    Ok(fields_dict!(
        py,
        s,
        [
            received,
            received_bytes,
            redelivered,
            acked,
            nacked,
            dead_lettered,
            acked_before,
            queued,
            corrupt
        ]
    ))
}

pub fn client_dict<'py>(py: Python<'py>, s: &ClientStats) -> PyResult<Bound<'py, PyDict>> {
    let d = fields_dict!(
        py,
        s,
        [
            connections_opened,
            connections_closed,
            connections_failed,
            connections_open,
            lookups,
            lookups_failed,
            metadata_lookups,
            metadata_lookups_failed,
        ]
    );
    d.set_item("lookup_duration_ms", latency(py, &s.lookup_duration)?)?;
    Ok(d)
}
