"""benchopt's own benchmark test suite (`benchopt test`) passes on every benchmark folder.

Its install tests create conda environments; they run only where conda exists.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.walnut_fixture import walnut_cache

BENCHMARKS = sorted(p.parent.name for p in REPO.glob("benchmark_*/objective.py"))


@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_benchopt_suite_passes(benchmark, tmp_path):
    import benchopt.tests

    suite = Path(benchopt.tests.__file__).parent
    selection = [] if shutil.which("conda") else ["-k", "not install"]  # needs conda
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           # walnut_conebeam reads its data from the cache: the miniature walnut.
           "SCALEBENCH_CACHE": str(walnut_cache(tmp_path / "cache"))}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "benchopt.tests.fixtures", "--rootdir",
         str(suite), str(suite / "test_benchmarks.py"), "--benchmark", str(REPO / benchmark),
         "--import-mode", "importlib", "-q", "-p", "no:cacheprovider", *selection],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600, check=False)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr
    assert done.returncode == 0 and " passed" in summary and "failed" not in summary, \
        done.stdout[-3000:]
