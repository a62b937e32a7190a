"""Wire format and size arithmetic: every raftos message is one encrypted UDP datagram.

FINDINGS 9: an AppendEntries over ~49 KB of command (Fernet adds a third) fails with
EMSGSIZE, which raftos only logs: the caller hangs, the leader is replaced and the entry
erased. So every size limit here is computed on the *encrypted* datagram: a proposal is
split into entries that each fit with the AppendEntries envelope, the leader packs several
entries into one AppendEntries only while they fit, and snapshots travel in chunks that fit.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from typing import Any

from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

from .storage import dumps

#: Largest UDP payload over IPv4 is 65,507 bytes; keep a margin below it.
DEFAULT_MAX_DATAGRAM_BYTES = 60_000

# Worst-case values for the AppendEntries fields around the entries, so the envelope
# estimate is an upper bound for any term/index this cluster will ever reach.
_BIG = 10**15
_ENVELOPE = {
    "type": "append_entries",
    "term": _BIG,
    "leader_id": "255.255.255.255:65535",
    "commit_index": _BIG,
    "request_id": _BIG,
    "prev_log_index": _BIG,
    "prev_log_term": _BIG,
    "entries": [],
}
_SNAPSHOT_ENVELOPE = {
    "type": "install_snapshot",
    "term": _BIG,
    "leader_id": "255.255.255.255:65535",
    "request_id": _BIG,
    "last_index": _BIG,
    "last_term": _BIG,
    "offset": _BIG,
    "total": _BIG,
    "data": "",
}


class JsonWireSerializer:
    """Compact UTF-8 JSON for raftos messages (raftos's default msgpack breaks, FINDINGS 1)."""

    @staticmethod
    def pack(data: Any) -> bytes:
        return dumps(data)

    @staticmethod
    def unpack(data: bytes) -> Any:
        return json.loads(data)


class SecretCryptor:
    """Fernet with a key derived from the cluster secret (FINDINGS 8: raftos kept its
    sample key whatever ``configure`` was given, so every cluster shared one public key).

    The salt is derived from the secret too, so every node derives the same key without a
    second setting; PBKDF2 makes guessing a weak secret from captured datagrams costly.
    """

    def __init__(self, secret: str) -> None:
        if not secret:
            raise ValueError("the cluster secret must not be empty: it keys raft encryption")
        salt = hashlib.sha256(b"tidelog raft salt\0" + secret.encode()).digest()[:16]
        kdf = PBKDF2HMAC(algorithm=hashes.SHA256(), length=32, salt=salt, iterations=100_000)
        self.salt = salt
        self.secret_key = secret.encode()
        self.fernet = Fernet(base64.urlsafe_b64encode(kdf.derive(secret.encode())))

    def encrypt(self, data: bytes) -> bytes:
        return self.fernet.encrypt(data)

    def decrypt(self, data: bytes) -> bytes:
        return self.fernet.decrypt(data)


def fernet_size(plain_bytes: int) -> int:
    """Exact length of a Fernet token for a plaintext of ``plain_bytes`` bytes.

    version(1) + timestamp(8) + IV(16) + AES-CBC ciphertext (PKCS7, whole 16-byte blocks)
    + HMAC(32), then URL-safe base64 with padding.
    """
    raw = 1 + 8 + 16 + (plain_bytes // 16 + 1) * 16 + 32
    return 4 * math.ceil(raw / 3)


def max_plain_bytes(max_datagram_bytes: int) -> int:
    """Largest plaintext whose Fernet token fits in ``max_datagram_bytes``."""
    lo, hi = 0, max_datagram_bytes
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fernet_size(mid) <= max_datagram_bytes:
            lo = mid
        else:
            hi = mid - 1
    return lo


class SizeBudget:
    """Byte budgets derived from the datagram cap, all measured after encryption."""

    def __init__(self, max_datagram_bytes: int = DEFAULT_MAX_DATAGRAM_BYTES) -> None:
        self.max_datagram_bytes = max_datagram_bytes
        self.plain = max_plain_bytes(max_datagram_bytes)
        #: room for the serialized entries list of one AppendEntries
        self.entries = self.plain - len(dumps(_ENVELOPE))
        #: raw snapshot bytes per install_snapshot chunk (base64 grows them by 4/3)
        self.snapshot_chunk = (self.plain - len(dumps(_SNAPSHOT_ENVELOPE))) // 4 * 3
        if self.entries < 1024:
            raise ValueError(f"max_datagram_bytes={max_datagram_bytes} leaves no room for entries")

    def entry_fits(self, entry: dict[str, Any]) -> bool:
        """Whether an AppendEntries carrying just ``entry`` fits in one datagram."""
        return len(dumps([entry])) <= self.entries

    def split_updates(self, updates: dict[str, Any], rid: str | None, txn: str) -> list[dict[str, Any]] | None:
        """Commands (as in ``machine``) carrying ``updates`` in as few entries as fit.

        Returns None when one key's update alone cannot fit (the caller raises
        ``CommandTooLarge``). Keys keep their insertion order across parts.
        """
        skeleton = {
            "term": _BIG,
            "command": {"op": "set", "u": {}, "rid": rid, "txn": txn, "part": _BIG, "parts": _BIG},
        }
        room = self.entries - len(dumps([skeleton]))
        groups: list[dict[str, Any]] = [{}]
        used = 0
        for key, value in updates.items():
            size = len(dumps({key: value})) - 1  # '"k":v,' minus the braces plus a comma
            if size > room:
                return None
            if used + size > room and groups[-1]:
                groups.append({})
                used = 0
            groups[-1][key] = value
            used += size
        n = len(groups)
        return [{"op": "set", "u": g, "rid": rid, "txn": txn, "part": i, "parts": n} for i, g in enumerate(groups)]

    def pack_entries(self, entries: list[dict[str, Any]]) -> int:
        """How many of ``entries`` (a prefix, at least one) fit in one AppendEntries."""
        used = 2  # the brackets
        for count, entry in enumerate(entries):
            size = len(dumps(entry)) + (1 if count else 0)
            if count and used + size > self.entries:
                return count
            used += size
        return len(entries)
