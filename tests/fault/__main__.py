"""``python -m tests.fault --seed S --duration 600``: a randomized fault run (or a soak of many).

Also ``--scenario NAME`` (one of ``scenarios.py``, as CI runs it) and
``--check DIR/history.jsonl`` (judge a saved history again, no cluster).
Prints the seed, the summary table and where the history is; exits 1 when
the checker or the liveness checks fail, 2 when this machine cannot run it.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from tests.fault.checker import check
from tests.fault.history import History
from tests.fault.nemesis import DEFAULT_KINDS, KINDS
from tests.fault.netns import unavailable_reason
from tests.fault.runner import RunConfig, run
from tests.fault.scenarios import SCENARIOS
from tests.fault.summary import render


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fault", description=__doc__)
    ap.add_argument("--seed", type=int, default=None, help="default: random, printed")
    ap.add_argument("--runs", type=int, default=1, help="consecutive runs with seeds seed, seed+1, ...")
    ap.add_argument("--duration", type=float, default=120.0, help="seconds of faults per run")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--rate", type=float, default=20.0, help="acks=all requests/s per partition")
    ap.add_argument("--kinds", default=",".join(DEFAULT_KINDS),
                    help="comma-separated, of: " + ", ".join(KINDS) + " (default: all but kill-all)")
    ap.add_argument("--scenario", choices=sorted(SCENARIOS), help="a focused CI scenario instead")
    ap.add_argument("--artifacts", type=Path, default=Path("fault-artifacts"))
    ap.add_argument("--check", type=Path, metavar="HISTORY", help="judge a saved history.jsonl and exit")
    args = ap.parse_args(argv)
    if args.check:
        return _recheck(args.check)
    if (why := unavailable_reason()) is not None:
        print(f"cannot run the fault suite here: {why}", file=sys.stderr)
        return 2
    kinds = tuple(k for k in args.kinds.split(",") if k)
    if unknown := set(kinds) - set(KINDS):
        ap.error(f"unknown kinds {sorted(unknown)}")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    failed = []
    for s in range(seed, seed + args.runs):
        print(f"fault run seed={s} duration={args.duration:g}s", flush=True)
        stamp = time.strftime("%Y%m%dT%H%M%S")
        res = run(RunConfig(seed=s, artifacts=args.artifacts / f"seed-{s}-{stamp}", duration_s=args.duration,
                            partitions=args.partitions, rate_hz=args.rate, kinds=kinds,
                            scenario=args.scenario))
        print(res.summary, flush=True)
        if not res.ok:
            failed.append(s)
    if args.runs > 1:
        print(f"{args.runs - len(failed)}/{args.runs} runs OK" + (f"; failed seeds: {failed}" if failed else ""))
    return 1 if failed else 0


def _recheck(path: Path) -> int:
    hist = History.load(path)
    head = next(e for e in hist.events if e["type"] == "run")
    cfg = RunConfig(seed=head["seed"], artifacts=path.parent, duration_s=head["duration_s"],
                    partitions=head["partitions"], scenario=head.get("scenario"))
    report = check(hist.events, cfg.partitions, cfg.gap_s)
    print(render(cfg, report, [], hist.events[-1]["t"]))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
