"""A serving process keeps numpy's BLAS on the calling thread unless the person chose a thread count."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory_hub.index.blas import THREAD_VARIABLES, limit_before_numpy


def test_one_blas_thread_unless_a_count_is_set() -> None:
    env: dict[str, str] = {}
    assert limit_before_numpy(env) == ["OPENBLAS_NUM_THREADS"]
    assert env == {"OPENBLAS_NUM_THREADS": "1"}
    for name in THREAD_VARIABLES:  # a person's own setting, whichever library it names, is left as it is
        mine = {name: "4"}
        assert limit_before_numpy(mine) == []
        assert mine == {name: "4"}


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads through Linux /proc")
def test_numpy_loaded_after_it_starts_no_blas_threads() -> None:
    """The variables work only before numpy loads: the serving path must not have imported it yet,
    and numpy loaded afterwards runs a product without starting a thread (a person's count is kept)."""
    code = ("import os, sys\n"
            "import memory_hub.server.run\n"
            "from memory_hub.index.blas import limit_before_numpy\n"
            "assert 'numpy' not in sys.modules, 'numpy imported before serve() can limit its threads'\n"
            "limit_before_numpy()\n"
            "import numpy\n"
            "numpy.ones((2000, 384), dtype=numpy.float32) @ numpy.ones(384, dtype=numpy.float32)\n"
            "print(len(os.listdir('/proc/self/task')))\n")
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}

    def threads(**extra: str) -> int:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**env, **extra},
                             check=True)
        return int(out.stdout.strip())

    assert threads() == 1
    assert threads(OPENBLAS_NUM_THREADS="2") == 2  # the control: the same library does start one when asked


_WATCH_NUMPY = '''\
"""Test probe: records, in the process that imports numpy first, the BLAS thread variables it loads with."""
import os, sys


class _NumpyWatch:
    def find_spec(self, name, path=None, target=None):
        if name == "numpy":
            sys.meta_path.remove(self)
            seen = {v: os.environ.get(v) for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}
            out = os.path.join(os.environ["NUMPY_WATCH_DIR"], str(os.getpid()))
            with open(out + ".tmp", "w") as f:
                f.write(repr((sys.argv, seen)))
            os.replace(out + ".tmp", out)
        return None


sys.meta_path.insert(0, _NumpyWatch())
'''


def test_the_real_server_loads_numpy_with_one_blas_thread(tmp_path: Path) -> None:
    """``memory-hub serve`` itself (not the helper) must set the limit before numpy loads: a probe on
    the server's import path records the variables at the moment numpy is first imported, in the
    real server process answering a real MCP client. Fails if ``serve()`` drops its limit or anything
    on the serving path imports numpy before it."""
    import ast
    import asyncio
    import shutil
    import time

    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    from memory_hub.config import template_dir
    from memory_hub.index.sync import sync

    vault = tmp_path / "vault"
    shutil.copytree(template_dir(), vault)
    sync(vault)
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "sitecustomize.py").write_text(_WATCH_NUMPY, encoding="utf-8")
    memory_hub = str(Path(sys.executable).parent / "memory-hub")

    def served_with(**extra: str) -> dict[str, str | None]:
        seen = tmp_path / f"seen-{len(list(tmp_path.glob('seen-*')))}"
        seen.mkdir()
        env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES and k != "MEMORY_HUB_VAULT"}
        env.update(extra, NUMPY_WATCH_DIR=str(seen),
                   PYTHONPATH=os.pathsep.join(filter(None, (str(probe), env.get("PYTHONPATH")))))

        async def scenario() -> dict[str, str | None]:
            transport = StdioTransport(command=memory_hub, args=["--vault", str(vault), "serve", "--no-watch"],
                                       env=env)
            async with Client(transport) as client:
                result = await client.call_tool("search", {"query": "blue-green rollback", "k": 3})
                assert result.structured_content["results"], result
                deadline = time.monotonic() + 120  # the models load in a background thread
                while time.monotonic() < deadline:
                    for f in seen.iterdir():
                        argv, variables = ast.literal_eval(f.read_text(encoding="utf-8"))
                        if any("serve" in a for a in argv):
                            return variables
                    await asyncio.sleep(0.2)
                raise AssertionError(f"the server never imported numpy within 120 s (probes: {list(seen.iterdir())})")

        return asyncio.run(scenario())

    assert served_with()["OPENBLAS_NUM_THREADS"] == "1"
    mine = served_with(OMP_NUM_THREADS="2")  # a person's own count is left as it is
    assert mine["OMP_NUM_THREADS"] == "2" and mine["OPENBLAS_NUM_THREADS"] is None
