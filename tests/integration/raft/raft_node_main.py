"""One RaftMetadataLog in its own process, driven by JSON lines on stdin/stdout.

usage: python raft_node_main.py --node-id 1 --voters 1=127.0.0.1:9001,2=... --data-dir D
       [--secret S] [--max-log-entries N|none] [--heartbeat 0.15] [--without B1,B4]

Each request line is {"id": n, "op": ..., ...}; each reply {"id": n, "ok": bool, ...}.
Requests run concurrently, so a slow propose does not block status polls.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from replication.controller.raft import (
    CommandTooLarge,
    NotLeaderError,
    ProposalTimeout,
    RaftMetadataLog,
    RaftSettings,
    patches,
)


def parse_voters(text: str) -> dict[int, tuple[str, int]]:
    voters = {}
    for item in text.split(","):
        node, addr = item.split("=")
        host, port = addr.rsplit(":", 1)
        voters[int(node)] = (host, int(port))
    return voters


async def handle(log: RaftMetadataLog, req: dict[str, Any]) -> dict[str, Any]:
    op = req["op"]
    try:
        if op == "status":
            return {"ok": True, **log.status()}
        if op == "state":
            return {"ok": True, "state": dict(log.state()), "applied": log.applied_index}
        if op == "propose":
            index = await log.propose(req["updates"], req.get("request_id"))
            return {"ok": True, "index": index}
        if op == "propose_many":
            # sequential proposals start..count-1; on failure report how far we got
            last, i = 0, int(req.get("start", 0))
            try:
                while i < req["count"]:
                    last = await log.propose({f"k{i % req.get('keys', 10)}": i, "seq": i}, f"m{i}")
                    i += 1
            except (NotLeaderError, ProposalTimeout) as exc:
                return {"ok": False, "error": type(exc).__name__, "done": i}
            return {"ok": True, "index": last, "done": i}
        if op == "barrier":
            await log.barrier()
            return {"ok": True, "applied": log.applied_index}
        if op == "request_index":
            return {"ok": True, "index": log.request_applied_index(req["request_id"])}
        if op == "exit":
            await log.stop()
            os._exit(0)
        return {"ok": False, "error": "unknown op"}
    except NotLeaderError as exc:
        return {"ok": False, "error": "NotLeaderError", "leader_id": exc.leader_id}
    except ProposalTimeout as exc:
        return {"ok": False, "error": type(exc).__name__}
    except CommandTooLarge:
        return {"ok": False, "error": "CommandTooLarge"}


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--node-id", type=int, required=True)
    ap.add_argument("--voters", required=True)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--secret", default="integration secret")
    ap.add_argument("--max-log-entries", default="1000")
    ap.add_argument("--heartbeat", type=float, default=0.15)
    ap.add_argument("--request-timeout", type=float, default=5.0)
    ap.add_argument("--without", default="")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    voters = parse_voters(args.voters)
    settings = RaftSettings(
        node_id=args.node_id,
        raft_addr=voters[args.node_id],
        voters=voters,
        data_dir=Path(args.data_dir),
        secret=args.secret,
        request_timeout_s=args.request_timeout,
        max_log_entries=None if args.max_log_entries == "none" else int(args.max_log_entries),
        heartbeat_interval_s=args.heartbeat,
    )
    without = [n for n in args.without.split(",") if n]
    with patches.without(*without) if without else contextlib.nullcontext():
        log = RaftMetadataLog(settings)
        await log.start()
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=2**24)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        print(json.dumps({"id": 0, "ok": True, "ready": True}), flush=True)
        tasks: set[asyncio.Task[None]] = set()

        async def serve(req: dict[str, Any]) -> None:
            reply = await handle(log, req)
            print(json.dumps({"id": req["id"], **reply}), flush=True)

        while line := await reader.readline():
            task = asyncio.create_task(serve(json.loads(line)))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        await log.stop()


if __name__ == "__main__":
    asyncio.run(main())
