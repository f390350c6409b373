"""Aggregation, markdown and chart for ``benches.compare`` results.

``python -m benches.report RESULTS.json`` re-renders ``results.md``/``results.png`` beside it.

Ratios are magnetar / other, computed per round (runs of the same round ran next to each other)
and summarised by their median with min and max. For CPU per message and latency, lower is
better (a ratio of 0.25 means magnetar needs a quarter); for throughput, higher is better.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

METRICS = ("throughput", "cpu_us_per_msg", "broker_cpu_us_per_msg", "cpu_percent_of_core")
LAT_KEYS = ("p50", "p99", "p999", "max")

# scenario prefix -> [(magnetar label, reference label)]
_PROD = [(m, ref) for m in ("magnetar send_async", "magnetar send_many", "magnetar asyncio send")
         for ref in ("official send_async", "java pulsar-perf")] + [("magnetar asyncio send", "official asyncio send")]
_CONS = [(m, ref) for m in ("magnetar receive", "magnetar receive_many", "magnetar async for")
         for ref in ("official receive", "java pulsar-perf")] + [
    ("magnetar receive_many", "official batch_receive"), ("magnetar async for", "official asyncio receive")]
COMPARISONS = {
    "produce": _PROD,
    "consume": _CONS,
    "blocking": [("magnetar send", "official send")],
    "latency": [("magnetar send_async", "official send_async"), ("magnetar send_async", "java pulsar-perf")],
    "idle": [("magnetar idle", "official idle")],
}


def _fmt(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "–"
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def one_line(rec: dict[str, Any]) -> str:
    """A progress line for one run."""
    head = f"{rec['scenario']:<14} r{rec['round']} {rec['label']:<26}"
    if rec.get("skipped"):
        return f"{head} skipped: {rec['skipped']}"
    if rec.get("error"):
        return f"{head} ERROR {str(rec['error'])[:400]}"
    parts = []
    if rec.get("throughput"):
        parts.append(f"{rec['throughput']:>10,.0f} msg/s")
    if rec.get("cpu_us_per_msg") is not None:
        parts.append(f"client {rec['cpu_us_per_msg']:.2f} us/msg")
    if rec.get("broker_cpu_us_per_msg") is not None:
        parts.append(f"broker {rec['broker_cpu_us_per_msg']:.2f} us/msg")
    if rec.get("cpu_percent_of_core") is not None:
        parts.append(f"idle CPU {rec['cpu_percent_of_core']:.2f}% of a core")
    if lat := rec.get("latency_ms"):
        parts.append("lat ms p50/p99/p99.9 " + "/".join(_fmt(lat.get(k)) for k in ("p50", "p99", "p999")))
    parts.append(f"load {rec.get('loadavg_start', 0):.1f}")
    parts.append("count ok" if rec.get("count_ok") else "COUNT MISMATCH")
    return f"{head} " + ", ".join(parts)


def _ok(r: dict[str, Any]) -> bool:
    return not r.get("skipped") and not r.get("error") and bool(r.get("count_ok"))


def _value(r: dict[str, Any], metric: str) -> float | None:
    if metric.startswith("lat_"):
        return (r.get("latency_ms") or {}).get(metric[4:])
    return r.get(metric)


def _stats(raw: list[float | None]) -> dict[str, float] | None:
    values = [v for v in raw if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def summarise(data: dict[str, Any]) -> dict[str, Any]:
    runs = data["runs"]
    scenarios: dict[str, dict[str, Any]] = {}
    for r in runs:
        sc = scenarios.setdefault(r["scenario"], {"kind": r["kind"], "clients": {}, "ratios": []})
        c = sc["clients"].setdefault(r["label"], {"runs": 0, "ok": 0, "skipped": None, "errors": []})
        c["runs"] += 1
        if r.get("skipped"):
            c["skipped"] = r["skipped"]
            continue
        if not _ok(r):
            c["errors"].append(str(r.get("error") or "count mismatch")[:300])
            continue
        c["ok"] += 1
    for name, sc in scenarios.items():
        ok_runs = [r for r in runs if r["scenario"] == name and _ok(r)]
        for label, c in sc["clients"].items():
            mine = [r for r in ok_runs if r["label"] == label]
            for metric in METRICS + tuple(f"lat_{k}" for k in LAT_KEYS):
                st = _stats([_value(r, metric) for r in mine])
                if st:
                    c[metric] = st
            if mine and any(r.get("capped") for r in mine):
                c["sent_median"] = statistics.median(r["messages"] for r in mine)
        by_round: dict[int, dict[str, dict[str, Any]]] = {}
        for r in ok_runs:
            by_round.setdefault(r["round"], {})[r["label"]] = r
        for mag, ref in COMPARISONS.get(sc["kind"], []):
            if mag not in sc["clients"] or ref not in sc["clients"]:
                continue
            entry: dict[str, Any] = {"magnetar": mag, "reference": ref}
            for metric in ("cpu_us_per_msg", "throughput", "broker_cpu_us_per_msg", "cpu_percent_of_core",
                           "lat_p50", "lat_p99", "lat_p999"):
                ratios: list[float | None] = []
                for rr in by_round.values():
                    if mag in rr and ref in rr:
                        a, b = _value(rr[mag], metric), _value(rr[ref], metric)
                        if a is not None and b:
                            ratios.append(a / b)
                st = _stats(ratios)
                if st:
                    entry[metric] = st
            if len(entry) > 2:
                sc["ratios"].append(entry)
    return {"scenarios": scenarios, "targets": targets(scenarios)}


def _ratio(scenarios: dict[str, Any], sc: str, mag: str, ref: str, metric: str) -> dict[str, float] | None:
    for e in scenarios.get(sc, {}).get("ratios", []):
        if e["magnetar"] == mag and e["reference"] == ref:
            return e.get(metric)
    return None


def _client(scenarios: dict[str, Any], sc: str, label: str, metric: str) -> dict[str, float] | None:
    return scenarios.get(sc, {}).get("clients", {}).get(label, {}).get(metric)


def targets(scenarios: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets, each with the measured value and a verdict (None: not measured)."""
    out: list[dict[str, Any]] = []

    def ratio_target(what: str, sc: str, mag: str, ref: str, metric: str, limit: float, higher: bool = False) -> None:
        st = _ratio(scenarios, sc, mag, ref, metric)
        verdict = None if st is None else (st["median"] >= limit if higher else st["median"] <= limit)
        shown = None if st is None else f"{st['median']:.3g} (min {st['min']:.3g}, max {st['max']:.3g})"
        out.append({"target": what, "measured": shown, "met": verdict})

    def abs_target(what: str, st: dict[str, float] | None, limit: float, unit: str) -> None:
        verdict = None if st is None else st["median"] <= limit
        shown = None if st is None else f"{st['median']:.3g} {unit} (min {st['min']:.3g}, max {st['max']:.3g})"
        out.append({"target": what, "measured": shown, "met": verdict})

    ratio_target("send_many CPU/msg ≤ 1/10 of official send_async (100 B)", "produce_100B", "magnetar send_many",
                 "official send_async", "cpu_us_per_msg", 0.1)
    abs_target("send_many CPU/msg < 1 µs (100 B)", _client(scenarios, "produce_100B", "magnetar send_many", "cpu_us_per_msg"), 1.0, "µs")
    ratio_target("receive_many CPU/msg ≤ 1/10 of official receive (100 B)", "consume_100B", "magnetar receive_many",
                 "official receive", "cpu_us_per_msg", 0.1)
    abs_target("receive_many CPU/msg < 1 µs (100 B)", _client(scenarios, "consume_100B", "magnetar receive_many", "cpu_us_per_msg"), 1.0, "µs")
    ratio_target("send_async CPU/msg ≤ 1/3 of official send_async", "produce_100B", "magnetar send_async",
                 "official send_async", "cpu_us_per_msg", 1 / 3)
    ratio_target("receive CPU/msg ≤ 1/3 of official receive", "consume_100B", "magnetar receive", "official receive",
                 "cpu_us_per_msg", 1 / 3)
    ratio_target("asyncio send CPU/msg ≤ 1/2 of official pulsar.asyncio send", "produce_100B", "magnetar asyncio send",
                 "official asyncio send", "cpu_us_per_msg", 0.5)
    ratio_target("async receive CPU/msg ≤ 1/2 of official pulsar.asyncio receive", "consume_100B", "magnetar async for",
                 "official asyncio receive", "cpu_us_per_msg", 0.5)
    ratio_target("send_many throughput ≥ pulsar-perf (100 B)", "produce_100B", "magnetar send_many", "java pulsar-perf",
                 "throughput", 1.0, higher=True)
    ratio_target("receive_many throughput ≥ pulsar-perf (100 B)", "consume_100B", "magnetar receive_many",
                 "java pulsar-perf", "throughput", 1.0, higher=True)
    abs_target("blocking send() p50 ≈ one round trip (< the 10 ms batch delay)",
               _client(scenarios, "blocking_send", "magnetar send", "lat_p50"), 10.0, "ms")
    ratio_target("latency p99 at 1,000 msg/s ≤ official", "latency_1k", "magnetar send_async", "official send_async",
                 "lat_p99", 1.0)
    ratio_target("latency p99 at 1,000 msg/s ≤ official, both clients at once", "latency_1k_together",
                 "magnetar send_async", "official send_async", "lat_p99", 1.0)
    ratio_target("latency p99 at 10,000 msg/s ≤ official", "latency_10k", "magnetar send_async", "official send_async",
                 "lat_p99", 1.0)
    abs_target("idle client < 1% of a core", _client(scenarios, "idle", "magnetar idle", "cpu_percent_of_core"), 1.0, "%")
    return out


def _rng(st: dict[str, float] | None, digits: int = 3) -> str:
    if not st:
        return "–"
    if st.get("n", 1) == 1:
        return _fmt(st["median"], digits)
    return f"{_fmt(st['median'], digits)} ({_fmt(st['min'], digits)}–{_fmt(st['max'], digits)})"


def markdown(data: dict[str, Any], summary: dict[str, Any]) -> str:
    meta = data.get("meta", {})
    m, sw, st = meta.get("machine", {}), meta.get("software", {}), meta.get("settings", {})
    loads = sorted({round(r["loadavg_start"], 1) for r in data["runs"] if r.get("loadavg_start") is not None})
    busy = [r["machine_busy"] for r in data["runs"] if r.get("machine_busy") is not None]
    lines = [
        f"## Results: {meta.get('mode', '?')} mode, {meta.get('rounds', '?')} round(s)"
        + (f", counts and durations × {meta['scale']}" if meta.get("scale", 1.0) != 1.0 else "")
        + f", {meta.get('started', '')}",
        "",
        f"- Machine: {m.get('nproc')} CPUs ({m.get('cpu_model')}), {m.get('mem_gib')} GiB RAM, Linux {m.get('kernel')}, "
        f"Python {m.get('python')}.",
        f"- Load average (1 min) at the start of the runs: {loads[0] if loads else '?'}–{loads[-1] if loads else '?'} "
        f"(before: {' '.join(m.get('loadavg', []))}; after: {' '.join(meta.get('loadavg_end', []) or [])}); "
        f"machine busy during the windows: median {statistics.median(busy) * 100:.0f}% of all CPUs." if busy else
        "- Load average: not recorded.",
        f"- magnetar {sw.get('magnetar')} from {sw.get('magnetar_module')} (work tree at git {sw.get('git_head')} with "
        f"{sw.get('git_dirty_files')} modified tracked files; extension sha256 {sw.get('extension_sha256')}), "
        f"pulsar-client {sw.get('pulsar_client')}, "
        f"broker and pulsar-perf {sw.get('pulsar')}, {sw.get('java') or 'no Java'}.",
        f"- Settings (all clients): batches of {st.get('BATCH_MAX_MESSAGES')} messages / {st.get('BATCH_MAX_BYTES')} B, "
        f"batch delay {st.get('BATCH_DELAY_MS')} ms ({st.get('LATENCY_BATCH_DELAY_MS')} ms for the latency runs), "
        f"no compression, receiver queue {st.get('RECEIVER_QUEUE')}, pending limit {st.get('MAX_PENDING')} (blocking), "
        f"asyncio concurrency {st.get('ASYNC_CONCURRENCY')} tasks, receive batches of {st.get('RECEIVE_BATCH')}.",
        f"- Total run time {meta.get('elapsed_s', '?')} s." + (f" Java skipped: {meta['java_skipped']}." if meta.get("java_skipped") else ""),
        "",
        "Client CPU is user+sys of the client's process over the measured window (all threads); broker CPU is the "
        "broker JVM's (broker and bookie) over the same window. Values are medians over rounds (min–max).",
        "",
        "### All clients",
        "",
        "| scenario | client | msg/s | client CPU µs/msg | broker CPU µs/msg | latency ms p50 / p99 / p99.9 | idle CPU % of a core | ok runs |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, sc in summary["scenarios"].items():
        for label, c in sc["clients"].items():
            if c.get("skipped"):
                lines.append(f"| {name} | {label} | skipped: {c['skipped']} | | | | | 0/{c['runs']} |")
                continue
            lat = " / ".join(_fmt((c.get(f"lat_{k}") or {}).get("median")) for k in ("p50", "p99", "p999")) \
                if c.get("lat_p50") and sc["kind"] in ("blocking", "latency") else "–"
            tput = _rng(c.get("throughput"))
            if c.get("sent_median"):
                tput += f" (time cap: {int(c['sent_median']):,} msgs)"
            lines.append(f"| {name} | {label} | {tput} | {_rng(c.get('cpu_us_per_msg'))} | "
                         f"{_rng(c.get('broker_cpu_us_per_msg'))} | {lat} | {_rng(c.get('cpu_percent_of_core'))} | "
                         f"{c['ok']}/{c['runs']} |")
    lines += ["", "### Ratios magnetar / reference (median of per-round ratios, min–max)", "",
              "Lower is better for CPU and latency; higher is better for throughput.", "",
              "| scenario | magnetar | vs | client CPU/msg | throughput | broker CPU/msg | latency p50 | latency p99 | idle CPU |",
              "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, sc in summary["scenarios"].items():
        for e in sc["ratios"]:
            lines.append(f"| {name} | {e['magnetar']} | {e['reference']} | {_rng(e.get('cpu_us_per_msg'))} | "
                         f"{_rng(e.get('throughput'))} | {_rng(e.get('broker_cpu_us_per_msg'))} | "
                         f"{_rng(e.get('lat_p50'))} | {_rng(e.get('lat_p99'))} | {_rng(e.get('cpu_percent_of_core'))} |")
    lines += ["", "### The issue's targets", "", "| target | measured | met |", "| --- | --- | --- |"]
    for t in summary["targets"]:
        verdict = {True: "yes", False: "**no**", None: "not measured"}[t["met"]]
        lines.append(f"| {t['target']} | {t['measured'] or '–'} | {verdict} |")
    errs = [(name, label, e) for name, sc in summary["scenarios"].items() for label, c in sc["clients"].items()
            for e in c["errors"]]
    if errs:
        lines += ["", "### Failed runs", ""] + [f"- {n} / {lbl}: {e}" for n, lbl, e in errs]
    return "\n".join(lines) + "\n"


def chart(summary: dict[str, Any], path: Path) -> Path | None:
    """Three panels: client CPU per message, throughput, publish latency p99. None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import NullFormatter
    except ImportError:
        return None
    scs = summary["scenarios"]
    tp_names = [n for n in ("produce_100B", "produce_1KiB", "consume_100B") if n in scs]
    lat_names = [n for n in ("latency_1k", "latency_1k_together", "latency_10k") if n in scs]
    panels = [("cpu_us_per_msg", "client CPU µs per message (log, lower is better)", tp_names, True),
              ("throughput", "msg/s (higher is better)", tp_names, False),
              ("lat_p99", "publish latency p99, ms (lower is better)", lat_names, False)]
    panels = [p for p in panels if p[2]]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 6.5), squeeze=False)

    def colour(label: str) -> str:
        return "#d9480f" if label.startswith("magnetar") else "#1c7ed6" if label.startswith("official") else "#5c940d"

    for ax, (metric, title, names, logx) in zip(axes[0], panels):
        ylabels, vals, errs_lo, errs_hi, cols = [], [], [], [], []
        for name in names:
            for label, c in scs[name]["clients"].items():
                st = c.get(metric)
                if not st:
                    continue
                ylabels.append(f"{name}: {label}")
                vals.append(st["median"])
                errs_lo.append(st["median"] - st["min"])
                errs_hi.append(st["max"] - st["median"])
                cols.append(colour(label))
        y = list(range(len(vals)))[::-1]
        ax.barh(y, vals, xerr=[errs_lo, errs_hi], color=cols, capsize=2)
        ax.set_yticks(y)
        ax.set_yticklabels(ylabels, fontsize=7)
        ax.set_title(title, fontsize=9)
        if logx and vals and min(vals) > 0:
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
        for yy, v, hi in zip(y, vals, errs_hi):
            ax.text(v + hi, yy, f" {_fmt(v)}", va="center", fontsize=6)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle("magnetar (orange) vs official pulsar-client (blue) vs Java pulsar-perf (green); "
                 "bars: median, whiskers: min–max over rounds", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    if len(args) != 1:
        print("usage: python -m benches.report RESULTS.json", file=sys.stderr)
        return 2
    path = Path(args[0])
    data = json.loads(path.read_text())
    summary = summarise(data)
    (path.parent / "summary.json").write_text(json.dumps(summary, indent=1))
    (path.parent / "results.md").write_text(markdown(data, summary))
    chart(summary, path.parent / "results.png")
    print((path.parent / "results.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
