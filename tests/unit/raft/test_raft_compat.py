"""raftos 0.2.6 on Python 3.11 (FINDINGS F1-F4, repro r01), install checks and the
ignored secret key (FINDINGS 8, repro r02)."""

from __future__ import annotations

import asyncio
import base64
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
import raftos
from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC
from raft_sim import SimNet
from raftos import replicator, serializers, server
from raftos import state as rs

from replication.controller.raft import patches
from replication.controller.raft.codec import JsonWireSerializer, SecretCryptor
from replication.controller.raft.errors import RaftVersionError

SAMPLE_KEY = b"raftos sample secret key"
SAMPLE_SALT = b"raftos sample salt"


def sample_fernet() -> Fernet:
    kdf = PBKDF2HMAC(algorithm=hashes.SHA256(), length=32, salt=SAMPLE_SALT, iterations=100_000)
    return Fernet(base64.urlsafe_b64encode(kdf.derive(SAMPLE_KEY)))


def test_version_check_accepts_only_0_2_6(monkeypatch: pytest.MonkeyPatch) -> None:
    patches.check_version()
    monkeypatch.setattr(metadata, "version", lambda name: "0.2.7")
    with pytest.raises(RaftVersionError, match=r"0\.2\.6"):
        patches.check_version()


def test_only_the_adapter_imports_raftos() -> None:
    """ARCHITECTURE: the consensus engine stays replaceable behind one package."""
    root = Path(__file__).resolve().parents[3]
    offenders = [
        str(path.relative_to(root))
        for top in ("app", "replication")
        if (root / top).is_dir()
        for path in (root / top).rglob("*.py")
        if "controller/raft" not in path.as_posix()
        and any(
            line.strip().startswith(("import raftos", "from raftos"))
            for line in path.read_text(errors="replace").splitlines()
        )
    ]
    assert offenders == []


@pytest.mark.parametrize("patched", [True, False], ids=["patched", "unpatched"])
async def test_f1_node_constructs_without_queue_loop_argument(tmp_path: Path, patched: bool) -> None:
    raftos.configure({"log_path": str(tmp_path)})
    loop = asyncio.get_running_loop()
    ctx = patches.without("F1") if not patched else _null()
    with ctx:
        if patched:
            node = server.Node(address=("127.0.0.1", 1), loop=loop)
            assert isinstance(node.requests, asyncio.Queue)
        else:
            with pytest.raises(TypeError, match="loop"):
                server.Node(address=("127.0.0.1", 1), loop=loop)
    server.Node.nodes.clear()


def test_f2_invalid_state_error_alias() -> None:
    assert asyncio.futures.InvalidStateError is asyncio.InvalidStateError  # type: ignore[attr-defined]
    with patches.without("F2"):
        assert not hasattr(asyncio.futures, "InvalidStateError")


@pytest.mark.parametrize("patched", [True, False], ids=["patched", "unpatched"])
async def test_f2_unpatched_follower_handler_applies(tmp_path: Path, patched: bool) -> None:
    """raftos's own apply loop names asyncio.futures.InvalidStateError in an ``except``;
    on 3.11 evaluating that raises AttributeError and followers drop AppendEntries."""
    names = ("B2",) if patched else ("B2", "F2")
    with patches.without(*names):  # raftos's original follower handler either way
        net = SimNet(tmp_path, [1, 2])
        await net.elect(1, {2})
        error = None
        try:
            for _ in range(3):  # raftos applies one message late
                await net.settle({1, 2})
                net.st(1).state.heartbeat()
            await net.settle({1, 2})
            assert net.st(2).log.last_applied >= 1
        except AttributeError as exc:
            error = exc
        net.stop()
    if patched:
        assert error is None
    else:
        assert error is not None and "InvalidStateError" in str(error)


def test_f3_msgpack_serializer_round_trips() -> None:
    data = {"term": 1, "command": {"k": "v"}}
    packed = serializers.MessagePackSerializer.pack(data)
    assert serializers.MessagePackSerializer.unpack(packed) == data
    with patches.without("F3"), pytest.raises(TypeError, match="encoding"):
        serializers.MessagePackSerializer.unpack(packed)


@pytest.mark.parametrize("patched", [True, False], ids=["patched", "unpatched"])
async def test_f4_replicated_dict_mutators_lock(monkeypatch: pytest.MonkeyPatch, patched: bool) -> None:
    store: dict[str, Any] = {}

    async def get_value(cls: Any, name: str) -> Any:
        return store[name]

    async def set_value(cls: Any, name: str, value: Any) -> None:
        store[name] = value

    monkeypatch.setattr(rs.State, "get_value", classmethod(get_value))
    monkeypatch.setattr(rs.State, "set_value", classmethod(set_value))
    ctx = patches.without("F4") if not patched else _null()
    with ctx:
        d = replicator.ReplicatedDict(name="d", default={})
        if patched:
            await d.update({"a": 1})
            assert store["d"] == {"a": 1}
        else:
            with pytest.raises(TypeError, match="await"):
                await d.update({"a": 1})


def test_secret_from_settings_is_really_used() -> None:
    """FINDINGS 8 / r02: configure(secret_key=...) left the sample key in place."""
    from raftos.conf import Configuration

    plain = Configuration()  # raftos's own path, as r02 ran it
    plain.configure({"secret_key": b"my real secret", "salt": b"my real salt"})
    assert sample_fernet().decrypt(plain.cryptor.encrypt(b"hello")) == b"hello"

    patches.configure(log_path="/nonexistent", heartbeat_interval_s=0.3, secret="s3cret")
    cryptor = raftos.config.cryptor
    assert isinstance(cryptor, SecretCryptor)
    token = cryptor.encrypt(b"hello")
    with pytest.raises(InvalidToken):
        sample_fernet().decrypt(token)
    assert SecretCryptor("s3cret").decrypt(token) == b"hello"  # every node derives the same key
    with pytest.raises(InvalidToken):
        SecretCryptor("other").decrypt(token)
    assert SecretCryptor("a").salt != SecretCryptor("b").salt
    assert raftos.config.serializer is JsonWireSerializer
    with pytest.raises(ValueError, match="secret"):
        SecretCryptor("")


def _null() -> Any:
    import contextlib

    return contextlib.nullcontext()
