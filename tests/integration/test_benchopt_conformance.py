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


def test_benchopt_suite_passes_without_the_walnut(tmp_path):
    """On a fresh machine, where nothing is fetched: the walnut's dataset and its one solver
    (fdk) are skipped as not installed, and everything else passes."""
    env = {**os.environ, "SCALEBENCH_CACHE": str(tmp_path / "empty-cache")}
    done = benchopt_suite(REPO / "benchmark_inference", tmp_path, "-rA", env=env)
    assert suite_passed(done), done.stdout[-3000:]
    assert "SKIPPED" in done.stdout and "Solver is not installed" in done.stdout
