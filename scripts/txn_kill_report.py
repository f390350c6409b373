"""The tables of docs/transactions.md from the output of `scripts/dev txn-kill`: one row per
shape (runs, kills in flight, runs not exact, missing, duplicated, load and seconds ranges), then
every run with its start time and load.

    python scripts/txn_kill_report.py shapes.log "broker.log=+ 3 broker kills"

A file given as ``FILE=SUFFIX`` has SUFFIX added to its shape names (the broker-kill runs).
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict

RUN = re.compile(
    r"^RUN (?P<shape>\S+) #(?P<run>\d+) (?P<started>\S+ \S+) UTC load (?P<l1>\S+) (?P<l5>\S+) (?P<l15>\S+): "
    r".*?kills (?P<kills>\d+) \((?P<inflight>\d+) in flight\), outputs (?P<outputs>\d+), missing (?P<missing>\d+), "
    r"duplicated (?P<dup>\d+), unexpected (?P<unexpected>\d+), (?P<secs>\d+) s$"
)


def runs(paths: list[str]) -> list[dict[str, str]]:
    out = []
    for arg in paths:
        path, _, suffix = arg.partition("=")
        with open(path) as f:
            for line in f:
                m = RUN.match(line.strip())
                if m:
                    r = m.groupdict()
                    r["shape"] = f"`{r['shape']}`" + (f" {suffix}" if suffix else "")
                    out.append(r)
    return out


def span(values: list[float], fmt: str) -> str:
    return f"{fmt.format(min(values))}-{fmt.format(max(values))}"


def main(paths: list[str]) -> None:
    rows = runs(paths)
    by_shape: dict[str, list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        by_shape[r["shape"]].append(r)
    print("| shape | runs | kills in flight | runs not exact | missing | duplicated | load (1 min) | seconds per run |")
    print("|---|---:|---:|---:|---:|---:|---|---|")
    for shape, rs in by_shape.items():
        bad = sum(1 for r in rs if int(r["missing"]) or int(r["dup"]) or int(r["unexpected"]))
        print(f"| {shape} | {len(rs)} | {sum(int(r['inflight']) for r in rs)} / {sum(int(r['kills']) for r in rs)} "
              f"| {bad} | {sum(int(r['missing']) for r in rs)} | {sum(int(r['dup']) for r in rs)} "
              f"| {span([float(r['l1']) for r in rs], '{:.1f}')} | {span([float(r['secs']) for r in rs], '{:.0f}')} |")
    print()
    print("| shape | run | started (UTC) | load 1/5/15 min | kills in flight | outputs | missing | duplicated | s |")
    print("|---|---:|---|---|---:|---:|---:|---:|---:|")
    for r in sorted(rows, key=lambda r: r["started"]):
        print(f"| {r['shape']} | {r['run']} | {r['started']} | {r['l1']} / {r['l5']} / {r['l15']} "
              f"| {r['inflight']} / {r['kills']} | {r['outputs']} | {r['missing']} | {r['dup']} | {r['secs']} |")


if __name__ == "__main__":
    main(sys.argv[1:])
