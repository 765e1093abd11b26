"""benchopt's own benchmark test suite (`benchopt test`) passes on every benchmark folder.

Its install tests create conda environments; they run only where conda exists.
"""

from __future__ import annotations

import os

import pytest

from tests.support.cli import benchopt_suite, suite_passed
from tests.support.paths import REPO
from tests.support.walnut_fixture import walnut_cache

BENCHMARKS = sorted(p.parent.name for p in REPO.glob("benchmark_*/objective.py"))


@pytest.mark.parametrize("benchmark", BENCHMARKS)
def test_benchopt_suite_passes(benchmark, tmp_path):
    # walnut_conebeam reads its data from the cache: the miniature walnut.
    env = {**os.environ, "SCALEBENCH_CACHE": str(walnut_cache(tmp_path / "cache"))}
    done = benchopt_suite(REPO / benchmark, tmp_path, env=env)
    assert suite_passed(done), done.stdout[-3000:]
