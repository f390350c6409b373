"""Stress scenarios run many times against a real broker (not part of CI).

    scripts/dev stress unload --runs 50                  # both modes, 50 runs each
    scripts/dev stress unload --runs 10 --mode live      # one mode
    scripts/dev stress unload --runs 3 --messages 5000   # smaller

``unload`` is issue 11's scenario (``magnetar.testing.stress``): 30,000 messages sent with
``send_async`` by a batching producer on a deduplicated topic while the topic is unloaded
(3 times for ``drain``, 6 for ``live``, 0.7 s apart); the Exclusive consumer drains afterwards
(``drain``) or acks live (``live``). A run fails if a message is lost or delivered again
after the application acked it. One line per run, a summary per mode, and the summary is
appended to ``docs/resilience.md`` (``--no-record`` to skip).

A broker is started for the command unless ``--service-url`` and ``--admin-url`` name one.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import sys
import time

import magnetar
from magnetar.testing import Admin, Standalone
from magnetar.testing.stress import UnloadRun, unload_run
from resilience_record import append_record, commit_label


def summary(runs: list[UnloadRun]) -> str:
    lines = ["| mode | runs | runs ok | runs with a delivery after its ack | deliveries after ack (total, max) "
             "| runs with loss | lost (total) | deliveries per message (mean) |",
             "| --- | ---: | ---: | ---: | --- | ---: | ---: | ---: |"]
    for mode in ("drain", "live"):
        rs = [r for r in runs if r.mode == mode]
        if not rs:
            continue
        after = [r.after_ack for r in rs]
        lines.append(
            f"| {mode} | {len(rs)} | {sum(r.ok for r in rs)} | {sum(1 for a in after if a)} | "
            f"{sum(after)}, {max(after)} | {sum(1 for r in rs if r.lost)} | {sum(r.lost for r in rs)} | "
            f"{sum(r.deliveries for r in rs) / sum(r.messages for r in rs):.2f} |")
    return "\n".join(lines)


def cmd_unload(args: argparse.Namespace) -> int:
    modes = ["drain", "live"] if args.mode == "both" else [args.mode]
    broker = None
    if args.service_url and args.admin_url:
        service_url, admin = args.service_url, Admin(args.admin_url)
    elif args.service_url or args.admin_url:
        print("--service-url and --admin-url go together", file=sys.stderr)
        return 2
    else:
        print("starting a standalone broker ...", flush=True)
        broker = Standalone(port=0).start()
        service_url, admin = broker.service_url, broker
    date, commit = _dt.date.today().isoformat(), args.commit or commit_label()
    runs: list[UnloadRun] = []
    t0 = time.monotonic()
    try:
        with magnetar.Client(service_url, operation_timeout=30.0, max_backoff=1.0) as client:
            for i in range(1, args.runs + 1):
                for mode in modes:  # interleaved, so both modes see the same broker conditions
                    r = unload_run(client, admin, mode=mode, messages=args.messages, unloads=args.unloads,
                                   gap=args.gap)
                    runs.append(r)
                    print(f"[{i}/{args.runs}] {r.line()}", flush=True)
    except KeyboardInterrupt:
        print("interrupted: summary of the runs done", flush=True)
    finally:
        if broker is not None:
            broker.stop()
    if not runs:
        return 1
    text = summary(runs)
    print()
    print(text)
    if not args.no_record:
        done = {m: sum(1 for r in runs if r.mode == m) for m in modes}
        append_record(f"{date}: `scripts/dev stress unload --runs {args.runs} --mode {args.mode}` "
                      f"({args.messages} messages, unloads {args.unloads or '3 (drain) / 6 (live)'} "
                      f"{args.gap} s apart; runs done {done}), {(time.monotonic() - t0) / 60:.0f} min, {commit}"
                      f"{', ' + args.note if args.note else ''}", text)
    return 0 if all(r.ok for r in runs) else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="scenario", required=True)
    u = sub.add_parser("unload", help="acked messages must not come back across topic unloads")
    u.add_argument("--runs", type=int, default=50, help="runs per mode (default 50)")
    u.add_argument("--mode", choices=["drain", "live", "both"], default="both")
    u.add_argument("--messages", type=int, default=30_000)
    u.add_argument("--unloads", type=int, default=None, help="unloads per run (default 3 drain, 6 live)")
    u.add_argument("--gap", type=float, default=0.7, help="seconds between unloads")
    u.add_argument("--service-url", default=None)
    u.add_argument("--admin-url", default=None)
    u.add_argument("--no-record", action="store_true", help="do not append the summary to docs/resilience.md")
    u.add_argument("--note", default="", help="a few words for the record's heading")
    u.add_argument("--commit", default=None,
                   help="what the extension was built from, for the record (default: HEAD, and whether src/ differs)")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.messages < 1:
        ap.error("--runs and --messages must be >= 1")
    return cmd_unload(args)


if __name__ == "__main__":
    sys.exit(main())
