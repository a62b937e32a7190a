"""Command line of the simulator: long soaks with a summary table, and replays.

    python -m tests.sim --seeds 2000                 # soak seeds 0..1999
    python -m tests.sim --seeds 500 --start 10000 --brokers 5 --partitions 3
    python -m tests.sim --seed 42 --trace            # replay one seed, print its trace
    python -m tests.sim --seeds 200 --disable hw_over_maximal_isr   # fault injection

Exit status 1 when any seed broke an invariant.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from dataclasses import replace

from tests.sim.harness import RULES, replay_command
from tests.sim.world import SimConfig, SimResult, run_seed


def _config(args: argparse.Namespace) -> SimConfig:
    cfg = SimConfig(
        brokers=args.brokers,
        partitions=args.partitions,
        replication_factor=min(3, args.brokers),
        min_insync_replicas=min(2, args.brokers),
        duration_ms=args.duration_ms,
    )
    off = {rule: False for rule in args.disable}
    return replace(cfg, rules=replace(cfg.rules, **off))


def _table(results: list[SimResult], elapsed_s: float) -> str:
    n = len(results)
    faults: Counter[str] = Counter()
    for r in results:
        faults.update(r.faults)
    broken = Counter(r.violation.invariant for r in results if r.violation is not None)
    rows = [
        ("seeds run", str(n)),
        ("seeds with a violation", str(sum(broken.values()))),
        ("events (mean per seed)", f"{sum(r.events for r in results) / max(n, 1):.0f}"),
        ("acks=all records acked (total)", str(sum(r.records_acked for r in results))),
        ("records committed (total)", str(sum(r.committed for r in results))),
        ("records consumed (total)", str(sum(r.records_consumed for r in results))),
        ("leader epochs taken up (mean)", f"{sum(r.leader_epochs for r in results) / max(n, 1):.2f}"),
        ("partitions without a leader at the end", str(sum(r.offline_at_end for r in results))),
        ("wall time", f"{elapsed_s:.1f} s ({elapsed_s / max(n, 1) * 1000:.0f} ms/seed)"),
    ]
    rows += [(f"fault: {k}", str(v)) for k, v in sorted(faults.items())]
    rows += [(f"violated: {k}", str(v)) for k, v in sorted(broken.items())]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v:>10}" for k, v in rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.sim", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=100, help="how many seeds to run")
    p.add_argument("--start", type=int, default=0, help="first seed")
    p.add_argument("--seed", type=int, help="replay this one seed")
    p.add_argument("--brokers", type=int, default=3)
    p.add_argument("--partitions", type=int, default=1)
    p.add_argument("--duration-ms", type=int, default=SimConfig().duration_ms)
    p.add_argument("--disable", action="append", default=[], choices=RULES,
                   help="switch off a safety rule (fault injection); repeatable")
    p.add_argument("--trace", action="store_true", help="print the trace of each failing seed")
    p.add_argument("--stop", action="store_true", help="stop at the first violation")
    args = p.parse_args(argv)
    cfg = _config(args)
    seeds = [args.seed] if args.seed is not None else range(args.start, args.start + args.seeds)
    results: list[SimResult] = []
    t0 = time.perf_counter()
    for seed in seeds:
        r = run_seed(seed, cfg)
        results.append(r)
        if r.violation is not None:
            print(r.report() if args.trace or args.seed is not None else f"seed {seed}: {r.violation}")
            print(f"replay: {replay_command(seed, cfg)}")
            if args.stop:
                break
        elif args.seed is not None and args.trace:
            print(r.report())
    print(_table(results, time.perf_counter() - t0))
    return 1 if any(r.violation for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
