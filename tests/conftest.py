"""Shared fixtures: tiny experiment files and a runner for the real command line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
BENCHMARK = REPO / "benchmark_inference"


def copy_benchmark(folder: Path, source: Path = BENCHMARK) -> Path:
    """A private copy of a benchmark folder inside ``folder``, so outputs stay in the test."""
    copy = folder / source.name
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("outputs", "__pycache__"))
    return copy


def edited_results(source: Path, target: Path, edit) -> Path:
    """``target``: the results file ``source`` with ``edit(DataFrame)`` applied to its rows,
    its metadata (provenance records, run record) kept."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(source)
    frame = edit(table.to_pandas())
    edited = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(edited.replace_schema_metadata(table.schema.metadata), target)
    return target


def tiny_experiment(**overrides) -> dict:
    """A seconds-long experiment: 32x32 tomography, 3 PnP and 2 denoiser iterations."""
    experiment = {
        "objective": ["imaging_inverse_problem"],
        "dataset": [{"tomography_2d": {"image_size": 32, "num_angles": 12,
                                       "num_operators": 2, "noise_level": 0.05}}],
        "solver": [
            {"pnp": {"max_iter": 3, "device": "cpu", "denoiser_sigma": 0.002}},
            {"denoiser": {"max_iter": 2, "device": "cpu"}},
        ],
        "n-repetitions": 1,
        "max-runs": 100,
        "timeout": 300,
    }
    experiment.update(overrides)
    return experiment


@pytest.fixture(autouse=True, scope="session")
def isolated_cache(tmp_path_factory):
    """What the tests cache (operator norms) goes to a fresh folder, never the user's cache;
    subprocesses inherit it."""
    previous = os.environ.get("SCALEBENCH_CACHE")
    os.environ["SCALEBENCH_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if previous is None:
        os.environ.pop("SCALEBENCH_CACHE", None)
    else:
        os.environ["SCALEBENCH_CACHE"] = previous


@pytest.fixture(scope="module")
def walnut_cache(tmp_path_factory) -> Path:
    """A scalebench cache holding the miniature walnut (tests/walnut_fixture.py)."""
    from tests.walnut_fixture import walnut_cache as fill

    return fill(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def full_orbit_walnut_cache(tmp_path_factory) -> Path:
    """The miniature walnut with the real scan's 1200 views per orbit, for configs that
    name as many views as the real data set has (validation checks the fetched count)."""
    from tests.walnut_fixture import walnut_cache as fill

    return fill(tmp_path_factory.mktemp("cache"), views=1200)


@pytest.fixture(scope="module")
def in_walnut_cache(walnut_cache):
    """SCALEBENCH_CACHE is ``walnut_cache`` for the module (walnut_conebeam reads it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SCALEBENCH_CACHE", str(walnut_cache))
        yield walnut_cache


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's headless Chromium (installed with apt when missing; tests/browser.py)."""
    from tests.browser import BrowserUnavailable, ensure_chromium_installed

    try:
        return ensure_chromium_installed()
    except BrowserUnavailable as error:
        pytest.skip(f"no headless browser: {error}")


@pytest.fixture
def write_config(tmp_path):
    def write(experiment: dict, name: str = "experiment.yml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(experiment, sort_keys=False))
        return path
    return write


def run_cli(*args: str, cwd: Path = REPO, timeout: int = 600) -> subprocess.CompletedProcess:
    """Run ``python -m scalebench ARGS`` as a user would, capturing its output."""
    return subprocess.run([sys.executable, "-m", "scalebench", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, check=False)
