"""Shared fixtures: tiny experiment files and a runner for the real command line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children of each of its threads, recursively)."""
    found, queue = [], [pid]
    while queue:
        for task in Path(f"/proc/{queue.pop()}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                children = []
            found += children
            queue += children
    return found


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


# --- two workers (pytest-xdist, as `make test` runs the suite) ------------------------------
# Every test belongs to a group that runs whole on one worker: the modules of the tests that
# build and run images (their session fixtures build each image once, and the SIF's SLURM jobs
# live in test_slurm_templates) form one group, every other module is a group of its own (its
# module fixtures run once). The scheduler sees node IDs only, so the groups are named by
# module; the collection checks that every test using an image fixture is in the image group.
# The image group goes first: it is the longest. Its modules run in IMAGE_MODULES' order:
# test_containers removes its podman image (the suite's disk peak) before test_apptainer
# builds the SIF, so the two never share the disk.
IMAGE_FIXTURES = frozenset({"container_base", "apptainer_on_path", "scalebench_sif"})
IMAGE_GROUP = "images"
IMAGE_MODULES = ("tests/test_containers.py", "tests/test_apptainer.py",
                 "tests/test_slurm_templates.py", "tests/test_runtimes.py")


def worker_group(nodeid: str) -> str:
    """The group of the test ``nodeid``: the image group, or its module's path."""
    module = nodeid.split("::", 1)[0]
    return IMAGE_GROUP if module in IMAGE_MODULES else module


def run_order(nodeid: str) -> tuple[bool, int]:
    """Sort key of the collected tests: the image group first, its modules in IMAGE_MODULES'
    order; the rest keep the collection's order (the sort is stable)."""
    module = nodeid.split("::", 1)[0]
    if module in IMAGE_MODULES:
        return False, IMAGE_MODULES.index(module)
    return True, 0


@pytest.hookimpl(optionalhook=True)  # xdist's hook: unknown where xdist is not installed
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class WorkerGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

    return WorkerGroups(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    outside = [item.nodeid for item in items if IMAGE_FIXTURES & set(item.fixturenames)
               and worker_group(item.nodeid) != IMAGE_GROUP]
    if outside:
        raise pytest.UsageError(f"{outside[0]} uses an image fixture outside IMAGE_MODULES "
                                f"(tests/conftest.py): add its module there")
    items.sort(key=lambda item: run_order(item.nodeid))


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


# --- real container images, built once per test session --------------------------------------


@dataclass(frozen=True)
class ContainerBase:
    """The stand-in base (no registry is reachable): podman holding it as ``reference``
    (NAME@sha256:DIGEST), and the same image as a docker-archive file for Apptainer."""

    podman: Any
    reference: str
    archive: Path


@dataclass(frozen=True)
class BuiltSif:
    """scalebench.sif built from containers/scalebench.def (the `scalebench_sif` fixture).

    ``path``: the SIF; ``digest``: what rows record for it (provenance.sif.sif_digest);
    ``apptainer``: the folder of the ``apptainer`` that built it (first on PATH for the
    session); ``base``, ``weights`` and ``build_options`` rebuild it the same way."""

    path: Path
    digest: str
    apptainer: str
    base: ContainerBase
    weights: Path
    build_options: tuple[str, ...]
    seconds: float


# The disk the image group takes at its peak, the podman build of the image (its layers
# staged while stored): 16.3 GB over the run's start, measured on a 2-core test machine
# (df's used space sampled every 15 s through `bash .ci/run`), and a margin.
IMAGE_DISK_BYTES = 20 * 2**30


@pytest.fixture(scope="session")
def container_base() -> ContainerBase:
    """Podman in a private storage root with the stand-in base (shared by both builds)."""
    from tests.container_tools import Podman, ensure_tools, stand_in_base

    ensure_tools()
    free = shutil.disk_usage(tempfile.gettempdir()).free
    if free < IMAGE_DISK_BYTES:
        pytest.fail(f"the image tests need {IMAGE_DISK_BYTES / 2**30:.0f} GiB free in "
                    f"{tempfile.gettempdir()}, {free / 2**30:.1f} GiB are", pytrace=False)
    # podman refuses a run root of 50 characters or more: not under pytest's (per-worker)
    # temporary folders.
    folder = Path(tempfile.mkdtemp(prefix="sb-base-"))
    podman = Podman(folder / "podman")
    try:
        started = time.monotonic()
        reference = stand_in_base(podman)
        archive = folder / "base.docker-archive.tar"
        saved = podman("save", "--format", "docker-archive", "-o", str(archive),
                       reference.split("@")[0])
        assert saved.returncode == 0, saved.stderr
        print(f"\nstand-in base made in {time.monotonic() - started:.0f} s")
        yield ContainerBase(podman, reference, archive)
    finally:
        podman.remove_everything()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def apptainer_on_path() -> str:
    """The folder of the apptainer the tests use (installed, else tests/apptainer_tools.py's
    wrapper), first on PATH for the session. Fails in one line when neither can start."""
    from tests.apptainer_tools import apptainer_on_path as folder_of_apptainer

    folder = folder_of_apptainer()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
        yield folder


# Where pip in an Apptainer build finds the test machine's wheels and CA: a folder the
# Ubuntu base has (empty), bound over for the build only.
APPTAINER_BUILD_MOUNT = "/mnt"


def sif_build_options(folder: Path) -> tuple[str, ...]:
    """apptainer build options of the tests: fakeroot (root needs it for %post here), pip's
    build-time settings bound read-only, the self-test left to `apptainer test`."""
    from tests.container_tools import pip_settings

    options = ["--fakeroot", "--notest"]
    for source, target in pip_settings(folder, APPTAINER_BUILD_MOUNT):
        options += ["--bind", f"{source}:{target}:ro"]
    return tuple(options)


def build_test_sif(output: Path, base: ContainerBase, weights: Path,
                   options: tuple[str, ...]) -> str:
    """containers/build.py's build_sif from the stand-in base's archive; returns the digest."""
    from containers.build import build_sif

    with pytest.MonkeyPatch.context() as patch:  # read by apptainer for %post only
        patch.setenv("APPTAINERENV_PIP_CONFIG_FILE", f"{APPTAINER_BUILD_MOUNT}/pip.conf")
        return build_sif(output, base.reference, weights, list(options), base.archive)


@pytest.fixture(scope="session")
def scalebench_sif(apptainer_on_path, container_base, tmp_path_factory):
    """containers/scalebench.def built once per session, every line the committed one but
    the bootstrap (the stand-in base's archive)."""
    from tests.container_tools import seeded_weights

    folder = tmp_path_factory.mktemp("sif")
    weights = seeded_weights(folder / "weights")
    options = sif_build_options(folder)
    started = time.monotonic()
    path = folder / "scalebench.sif"
    digest = build_test_sif(path, container_base, weights, options)
    seconds = time.monotonic() - started
    print(f"\nSIF built in {seconds:.0f} s, {path.stat().st_size / 2**20:.0f} MiB")
    yield BuiltSif(path, digest, apptainer_on_path, container_base, weights, options, seconds)
    path.unlink()  # gigabytes that pytest's kept temporary folders would hold on to
