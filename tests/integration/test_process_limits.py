"""A node lifts its soft open-files limit (every segment keeps a file open)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import wait_until
from tests.support.node import free_port


def _limits(pid: int) -> tuple[int, int]:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError("no open files limit in /proc")


@pytest.mark.skipif(not Path("/proc/self/limits").exists(), reason="needs /proc (Linux)")
def test_serve_raises_a_low_soft_open_files_limit_to_the_hard_limit(tmp_path: Path) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard <= 256:
        pytest.skip("needs a finite hard limit above 256")

    def low_soft_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))

    port = free_port()
    env = {**os.environ, "TIDELOG_PORT": str(port), "TIDELOG_DATA_DIR": str(tmp_path / "d"),
           "TIDELOG_LOG_LEVEL": "warning"}
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "serve"], env=env, preexec_fn=low_soft_limit,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: _limits(proc.pid) == (hard, hard), what="the soft limit raised", timeout_s=30)
    finally:
        proc.kill()
        proc.wait()
