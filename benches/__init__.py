"""Side-by-side benchmarks of magnetar, the official ``pulsar-client`` and Java ``pulsar-perf``.

Entry point: ``python -m benches.compare`` (``--quick`` for a smoke run). See
``docs/benchmarks.md`` for the method and the latest results, and ``benches/codec.rs`` for the
criterion benches of the Rust codec alone.

Layout:

- ``compare.py``: starts the broker, runs every client in its own process, interleaved, and
  writes the JSON results, the markdown table and the PNG chart.
- ``common.py``: what the per-client processes share (settings, CPU windows, percentiles).
- ``clients/magnetar_bench.py``, ``clients/official_bench.py``: one run of one scenario with
  one client API, as a subprocess (``python -m benches.clients.<name> SPEC.json OUT.json``).
- ``clients/java_perf.py``: runs ``pulsar-perf`` from the broker distribution and samples its
  CPU from ``/proc`` over the measured window.
- ``report.py``: aggregation (median of per-round ratios), markdown and chart.
"""
