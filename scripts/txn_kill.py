"""Exactly-once under kill -9: a consume-transform-produce worker, killed mid-transaction over
and over, must leave every input reflected exactly once in the output.

    scripts/dev txn-kill                                 # every shape once: 20 kills, 300 inputs
    scripts/dev txn-kill --runs 20 --case failover-batched --trace /tmp/tk
    scripts/dev txn-kill --kills 5 --url pulsar://127.0.0.1:6650 --admin-url http://127.0.0.1:8080

The loop itself is ``magnetar.testing.txn_kill`` (its docstring says what a run does, and its
CASES name the shapes: subscription type, ack kind, batched or chunked input, partitioned
output). Each run prints one line with the UTC time and the load average; a run that is not
exactly once makes the exit status 1. Results go in docs/transactions.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from typing import Any

from magnetar.testing.txn_kill import CASES, TRACE_ENV, kill_loop


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="a broker with transactions on (default: start one)")
    p.add_argument("--admin-url", help="with --url: its admin URL (partitioned output, traced stats)")
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--inputs", type=int, default=300)
    p.add_argument("--txn-timeout", type=float, default=5.0)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--runs", type=int, default=1, help="runs of each shape")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--broker-kills", type=int, default=0,
                   help="of the kills, how many also kill -9 and restart the broker (its own broker only)")
    p.add_argument("--case", action="append", choices=sorted(CASES),
                   help="which shapes to run (repeatable; default: all)")
    p.add_argument("--trace", metavar="DIR",
                   help="each worker's transactions and debug log, and the input's stats, in DIR/<shape>-<run>/")
    args = p.parse_args()

    def all_cases(url: str, admin_url: str | None, restart: Any = None, heal: Any = None) -> int:
        failed = 0
        # Run by run, every shape in each, so that a stopped session has the same count of each.
        for run in range(1, args.runs + 1):
            for case in args.case or list(CASES):
                if args.trace:
                    os.environ[TRACE_ENV] = os.path.join(args.trace, f"{case}-{run}")
                if heal is not None:
                    heal()
                started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
                loop = kill_loop(url, case, inputs=args.inputs, kills=args.kills, txn_timeout=args.txn_timeout,
                                 rounds=args.rounds, seed=args.seed, admin_url=admin_url,
                                 restart_broker=restart, broker_kills=args.broker_kills)
                load = " ".join(f"{x:.1f}" for x in os.getloadavg())
                print(f"RUN {case} #{run} {started} UTC load {load}: {loop.summary()}", flush=True)
                failed |= not loop.exactly_once
        return failed

    if args.url:
        if args.broker_kills:
            p.error("--broker-kills restarts the script's own broker: leave out --url")
        return all_cases(args.url, args.admin_url)
    from magnetar.testing import Standalone
    from magnetar.testing._broker_restart import can_store, kill9, restart, restartable_broker

    if not args.broker_kills:
        with Standalone(port=0) as broker:
            return all_cases(broker.service_url, broker.admin_url)
    def heal(broker: Any) -> None:
        # A restarted standalone's bookie has been seen to stop taking new ledgers a while
        # later: the broker's fault, not the loop's, so each run starts on one that stores.
        if not can_store(broker.service_url):
            print("the broker could not store a message: killed and restarted it", flush=True)
            kill9(broker)
            restart(broker)

    with restartable_broker() as broker:
        return all_cases(broker.service_url, broker.admin_url, lambda: (kill9(broker), restart(broker)),
                         lambda: heal(broker))


if __name__ == "__main__":
    sys.exit(main())
