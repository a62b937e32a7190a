"""The controller state machine imports no I/O, clock or randomness (STYLE.md 1, 3)."""

from __future__ import annotations

import ast
from pathlib import Path

import replication.controller as pkg

ALLOWED = {
    "__future__",
    "collections",
    "collections.abc",
    "copy",
    "dataclasses",
    "hashlib",
    "re",
    "typing",
}


def test_controller_modules_import_only_pure_stdlib_and_each_other():
    root = Path(pkg.__file__).parent
    files = list(root.glob("*.py"))
    assert len(files) >= 10
    for f in files:
        for node in ast.walk(ast.parse(f.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                ok = name in ALLOWED or name.startswith("replication.controller")
                assert ok and not name.startswith("replication.controller.raft"), (
                    f"{f.name} imports {name}"
                )
