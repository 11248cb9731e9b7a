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
