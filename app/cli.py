"""``tidelog`` command line: run a node, manage topics, produce and consume."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Any

import orjson
import typer

from app.client import Client, TidelogError

cli = typer.Typer(help="tidelog: a replicated, partitioned commit log over HTTP.",
                  pretty_exceptions_enable=False,
                  no_args_is_help=True, add_completion=False)
topics_cli = typer.Typer(help="Create, list, describe and delete topics.", no_args_is_help=True)
cli.add_typer(topics_cli, name="topics")

UrlOpt = typer.Option(
    "http://127.0.0.1:8080", "--url", "-u", envvar="TIDELOG_URL", help="Any node's URL."
)


def _fail(e: TidelogError) -> None:
    typer.secho(f"error: {e.code}: {e.detail}", err=True, fg=typer.colors.RED)
    raise typer.Exit(2)


def _print(obj: Any) -> None:
    sys.stdout.write(orjson.dumps(obj, option=orjson.OPT_INDENT_2).decode() + "\n")


@cli.command()
def serve(
    node_id: int | None = typer.Option(None, help="Broker id [TIDELOG_NODE_ID]"),
    host: str | None = typer.Option(None, help="Listen address [TIDELOG_HOST]"),
    port: int | None = typer.Option(None, help="HTTP port [TIDELOG_PORT]"),
    data_dir: Path | None = typer.Option(None, help="Data directory [TIDELOG_DATA_DIR]"),
    advertised_url: str | None = typer.Option(None, help="[TIDELOG_ADVERTISED_URL]"),
    catalog_url: str | None = typer.Option(None, help="SQLAlchemy URL [TIDELOG_CATALOG_URL]"),
    fsync_policy: str | None = typer.Option(None, help="never|interval|always"),
    log_level: str | None = typer.Option(None, help="debug|info|warning"),
) -> None:
    """Run a node. Flags override ``TIDELOG_*`` environment variables."""
    import uvicorn

    from app.api.app import create_app
    from app.settings import Settings

    overrides: dict[str, Any] = {
        k: v for k, v in dict(
            node_id=node_id, host=host, port=port, data_dir=data_dir,
            advertised_url=advertised_url, catalog_url=catalog_url,
            fsync_policy=fsync_policy, log_level=log_level,
        ).items() if v is not None
    }
    settings = Settings(**overrides)
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for noisy in ("alembic", "httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    _raise_open_files_limit()
    app = create_app(settings)
    uvicorn.run(
        app, host=settings.host, port=settings.port, log_level=settings.log_level,
        access_log=settings.access_log, loop="uvloop", http="httptools",
        timeout_graceful_shutdown=2,
    )


def _raise_open_files_limit() -> None:
    """Lift the soft open-files limit to the hard one.

    Every segment keeps its file open (and its index files are mapped), so a
    broker with thousands of partitions passes the common default soft limit
    of 1,024 long before memory or disk run out; brokers like Kafka ask
    operators to raise it by hand. Going up to the hard limit needs no
    privilege.
    """
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        except (ValueError, OSError) as e:
            logging.getLogger("tidelog").warning("could not raise the open files limit from %d: %s", soft, e)


@topics_cli.command("create")
def topics_create(
    name: str,
    partitions: int = typer.Option(1, "--partitions", "-p"),
    replication_factor: int = typer.Option(1, "--replication-factor", "-r"),
    config: list[str] = typer.Option([], "--config", "-c", help="key=value, repeatable"),
    url: str = UrlOpt,
) -> None:
    """Create a topic (idempotent for the same spec)."""
    cfg: dict[str, Any] = {}
    for item in config:
        k, _, v = item.partition("=")
        try:
            cfg[k] = orjson.loads(v)
        except orjson.JSONDecodeError:
            cfg[k] = v
    with Client(url) as c:
        try:
            _print(c.create_topic(name, partitions, replication_factor, cfg or None))
        except TidelogError as e:
            _fail(e)


@topics_cli.command("list")
def topics_list(url: str = UrlOpt) -> None:
    with Client(url) as c:
        for t in c.list_topics():
            typer.echo(f"{t['name']}\tpartitions={t['partitions']}\trf={t['replication_factor']}")


@topics_cli.command("describe")
def topics_describe(name: str, url: str = UrlOpt) -> None:
    with Client(url) as c:
        try:
            _print(c.describe_topic(name))
        except TidelogError as e:
            _fail(e)


@topics_cli.command("delete")
def topics_delete(name: str, url: str = UrlOpt) -> None:
    with Client(url) as c:
        try:
            c.delete_topic(name)
        except TidelogError as e:
            _fail(e)


@cli.command()
def produce(
    topic: str,
    partition: int | None = typer.Option(None, "--partition", "-p"),
    ndjson: bool = typer.Option(False, "--ndjson", help="Each line is a record object"),
    key: str | None = typer.Option(None, "--key", "-k", help="Key for every record"),
    batch: int = typer.Option(1000, help="Records per request"),
    acks: str = typer.Option("all", help="all|leader|none"),
    url: str = UrlOpt,
) -> None:
    """Produce stdin lines (each line a value: JSON if it parses, else a string)."""
    from rich.progress import Progress, SpinnerColumn, TextColumn

    def records() -> Any:
        for n, line in enumerate(sys.stdin.buffer, 1):
            line = line.rstrip(b"\r\n")
            if not line:
                continue
            if ndjson:
                try:
                    rec = orjson.loads(line)
                except orjson.JSONDecodeError as e:
                    typer.secho(f"error: line {n} is not JSON: {e}", err=True, fg="red")
                    raise typer.Exit(2) from None
            else:
                try:
                    value = orjson.loads(line)
                except orjson.JSONDecodeError:
                    value = line.decode("utf-8", "replace")
                rec = {"value": value}
                if key is not None:
                    rec["key"] = key
            yield rec

    tty = sys.stderr.isatty()
    total = 0
    with Client(url) as c, Progress(
        SpinnerColumn(), TextColumn("{task.description}"), disable=not tty, transient=True
    ) as prog:
        task = prog.add_task("producing", total=None)
        buf: list[dict[str, Any]] = []

        def send() -> None:
            nonlocal total
            try:
                c.produce(topic, buf, partition=partition, acks=acks)
            except TidelogError as e:
                _fail(e)
            total += len(buf)
            prog.update(task, description=f"produced {total} records")
            buf.clear()

        for rec in records():
            buf.append(rec)
            if len(buf) >= batch:
                send()
        if buf:
            send()
    typer.echo(f"produced {total} records", err=True)


@cli.command()
def consume(
    topic: str,
    partition: int = typer.Option(0, "--partition", "-p"),
    from_: str = typer.Option("earliest", "--from", help="earliest|latest|OFFSET"),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep waiting for new records"),
    isolation: str = typer.Option("committed", help="committed|uncommitted"),
    url: str = UrlOpt,
) -> None:
    """Print records as JSON lines."""
    start: int | str = int(from_) if from_.lstrip("-").isdigit() else from_
    out = sys.stdout.buffer
    with Client(url) as c:
        try:
            for rec in c.consume(topic, partition, start, follow=follow, isolation=isolation):
                out.write(orjson.dumps(rec) + b"\n")
                out.flush()
        except TidelogError as e:
            _fail(e)
        except (KeyboardInterrupt, BrokenPipeError):
            pass


@cli.command("dev-cluster")
def dev_cluster(
    nodes: int = typer.Option(3, "--nodes", "-n", min=1, max=9),
    base_port: int = typer.Option(8081, help="HTTP port of node 1; node i gets base+i-1"),
    raft_base_port: int = typer.Option(9001, help="raft UDP port of node 1"),
    data_dir: Path = typer.Option(Path("data/dev"), help="node i keeps its data in DIR/node<i>"),
    host: str = typer.Option("127.0.0.1"),
) -> None:
    """Run a local cluster of N nodes (all controller voters) until Ctrl-C."""
    import secrets
    import signal
    import subprocess
    import time

    import httpx

    data_dir.mkdir(parents=True, exist_ok=True)
    secret_file = data_dir / "cluster-secret"
    if not secret_file.exists():
        secret_file.write_text(secrets.token_hex(16))
        secret_file.chmod(0o600)
    secret = secret_file.read_text().strip()
    voters = ",".join(
        f"{i}=http://{host}:{base_port + i - 1}@{host}:{raft_base_port + i - 1}"
        for i in range(1, nodes + 1)
    )
    procs: list[subprocess.Popen[bytes]] = []
    for i in range(1, nodes + 1):
        env = {
            **os.environ,
            "TIDELOG_NODE_ID": str(i),
            "TIDELOG_HOST": host,
            "TIDELOG_PORT": str(base_port + i - 1),
            "TIDELOG_DATA_DIR": str(data_dir / f"node{i}"),
            "TIDELOG_VOTERS": voters,
            "TIDELOG_CLUSTER_SECRET": secret,
        }
        procs.append(subprocess.Popen([sys.executable, "-m", "app.cli", "serve"], env=env))

    def shutdown(*_: object) -> None:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
        raise typer.Exit(0)

    signal.signal(signal.SIGTERM, shutdown)
    signal.signal(signal.SIGINT, shutdown)
    urls = [f"http://{host}:{base_port + i}" for i in range(nodes)]
    deadline = time.monotonic() + 60
    pending = set(urls)
    while pending and time.monotonic() < deadline:
        for u in list(pending):
            try:
                if httpx.get(f"{u}/readyz", timeout=1).status_code == 200:
                    pending.discard(u)
            except httpx.HTTPError:
                pass
        if any(p.poll() is not None for p in procs):
            typer.secho("a node exited during start-up", err=True, fg="red")
            shutdown()
        time.sleep(0.2)
    if pending:
        typer.secho(f"not ready after 60 s: {sorted(pending)}", err=True, fg="red")
    else:
        typer.echo(f"dev cluster ready: {' '.join(urls)} (Ctrl-C stops it)")
    # Keep running when a node dies (that is what a dev cluster is for: kill one,
    # watch the others fail over); say so once per exit.
    reported: set[int] = set()
    while True:
        for i, p in enumerate(procs, 1):
            if p.poll() is not None and i not in reported:
                reported.add(i)
                typer.secho(f"node {i} exited with {p.returncode}", err=True, fg="yellow")
        time.sleep(0.5)


def main() -> None:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    import httpx

    try:
        cli()
    except httpx.TransportError as e:
        # A node that is down or unreachable is an operator error, not a crash: one line.
        try:
            where = str(e.request.url)
        except RuntimeError:  # httpx raises when the error carries no request
            where = "the node"
        typer.secho(f"error: cannot reach {where}: {e}", err=True, fg=typer.colors.RED)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
