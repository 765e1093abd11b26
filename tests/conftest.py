"""The suite's shared fixtures and how it runs: markers by folder, worker groups.

Tests are grouped by what they start (docs/development.md): ``tests/unit`` runs in the test
process, ``tests/integration`` starts benchopt runs and processes, ``tests/system`` starts
SLURM clusters, container images and a browser. Each folder's tests get its marker (``-m
unit``, ...); helpers shared by the tests are in ``tests/support``.
"""

from __future__ import annotations

import _posixsubprocess
import os
import subprocess
from pathlib import Path

import pytest

FOLDER_MARKERS = ("unit", "integration", "system")

# --- two workers (pytest-xdist, as `make test` runs the suite) ------------------------------
# Every test belongs to a group that runs whole on one worker: the modules of the tests that
# build and run images (their session fixtures build each image once, and the SIF's SLURM jobs
# live in test_slurm_templates) form one group, the report's modules that read one campaign
# another, every other integration or system module is a group of its own (its module fixtures
# run once), and so is every unit test outside WHOLE_UNIT_MODULES. The
# scheduler sees node IDs only, so the groups are named by module; the collection checks that
# every test using an image fixture is in the image group. The image group goes first: it is
# the longest. Its modules run in IMAGE_MODULES' order: test_containers removes its podman
# image (the suite's disk peak) before test_apptainer builds the SIF, so the two never share
# the disk.
IMAGE_FIXTURES = frozenset({"container_base", "apptainer_on_path", "scalebench_sif"})
IMAGE_GROUP = "images"
IMAGE_MODULES = ("tests/system/test_containers.py", "tests/system/test_apptainer.py",
                 "tests/system/test_slurm_templates.py", "tests/system/test_runtimes.py")
# Unit modules whose module fixtures cost seconds (the miniature walnut) run whole on one
# worker; every other unit test is a group of its own.
COSTLY_UNIT_FIXTURES = frozenset({"walnut_cache", "many_views_walnut_cache", "in_walnut_cache"})
WHOLE_UNIT_MODULES = ("tests/unit/test_adjointness.py", "tests/unit/test_conebeam.py",
                      "tests/unit/test_config.py", "tests/unit/test_fdk.py",
                      "tests/unit/test_tools.py")
# Modules sharing a session fixture (one campaign of real runs) run on one worker.
SHARED_GROUPS = {
    "report": ("tests/integration/test_report.py", "tests/system/test_report_browser.py",
               "tests/integration/test_report_campaign.py",
               "tests/system/test_report_campaign_browser.py"),
    "tuning": ("tests/integration/test_tuning.py", "tests/integration/test_report_tuned.py"),
}


def worker_group(nodeid: str) -> str:
    """The group of the test ``nodeid``: the image group, a shared group, its module, or, for
    a unit test outside WHOLE_UNIT_MODULES, the test itself (their module fixtures are cheap;
    whole modules of tens of seconds left one worker finishing alone)."""
    module = nodeid.split("::", 1)[0]
    if module in IMAGE_MODULES:
        return IMAGE_GROUP
    if module.startswith("tests/unit/") and module not in WHOLE_UNIT_MODULES:
        return nodeid
    return next((group for group, modules in SHARED_GROUPS.items() if module in modules),
                module)


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


@pytest.fixture(autouse=True, scope="session")
def worker_share_of_the_cores() -> None:
    """Each worker's torch, and that of every process the worker starts (OMP_NUM_THREADS,
    which the launcher hands to ranks and containers), runs on the worker's share of the
    cores. torch's default, one thread per core in every process, oversubscribes them:
    OpenMP threads then spin waiting for each other, and small tensor operations take
    several times as long (tests/unit's test_algorithms and test_cgls on 2 workers and 2
    cores: 106 s, 41 s with one thread each; the capacity, distributed and report-campaign
    modules' runs: 717 s, 605 s). A test of torch's default thread count removes the
    variable from its processes' environment (comparing_page.default_threads_env)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        import torch

        share = max(1, len(os.sched_getaffinity(0)) // workers)
        torch.set_num_threads(share)
        os.environ["OMP_NUM_THREADS"] = str(share)


def folder_marker(nodeid: str) -> str | None:
    """The marker of a test's folder (tests/unit/...: 'unit'), None outside them."""
    parts = nodeid.split("::", 1)[0].split("/")
    return parts[1] if len(parts) > 2 and parts[1] in FOLDER_MARKERS else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    outside = [item.nodeid for item in items if IMAGE_FIXTURES & set(item.fixturenames)
               and worker_group(item.nodeid) != IMAGE_GROUP]
    if outside:
        raise pytest.UsageError(f"{outside[0]} uses an image fixture outside IMAGE_MODULES "
                                f"(tests/conftest.py): add its module there")
    split = [item.nodeid for item in items if COSTLY_UNIT_FIXTURES & set(item.fixturenames)
             and worker_group(item.nodeid) == item.nodeid]
    if split:
        raise pytest.UsageError(f"{split[0]} uses a costly module fixture in a unit module "
                                f"split between workers: add its module to WHOLE_UNIT_MODULES "
                                f"(tests/conftest.py)")
    for item in items:
        marker = folder_marker(item.nodeid)
        if marker is not None:
            item.add_marker(marker)
    items.sort(key=lambda item: run_order(item.nodeid))


# --- unit tests start nothing -------------------------------------------------------------
# Every way this interpreter starts or becomes another process: subprocess (run, Popen,
# check_output, os.popen and asyncio's go through _execute_child), os's fork, spawn, system
# and exec (the other exec* and spawn* call these), and the fork-exec of multiprocessing's
# spawn and forkserver methods.
PROCESS_STARTERS = ((subprocess.Popen, "_execute_child"), (os, "fork"), (os, "forkpty"),
                    (os, "posix_spawn"), (os, "posix_spawnp"), (os, "system"), (os, "execv"),
                    (os, "execve"), (_posixsubprocess, "fork_exec"))


def refuse_process_start(what: str):
    """A stand-in for ``what`` that fails the running test: pytest's failure is a
    BaseException, so ``except Exception`` in the code under test does not swallow it."""
    def refused(*args, **kwargs):
        pytest.fail(f"a unit test starts no process, but this one called {what}: move it to "
                    f"tests/integration (docs/development.md, Tests)")
    return refused


@pytest.fixture(scope="session")
def test_process_stack() -> None:
    """What starts processes once per process, done before a worker's first unit test: torch's
    import (its CUDA libraries' lookup asks ldconfig), deepinv's (h5py asks the platform for
    its processor, which runs uname once and caches it), matplotlib's font list (built once
    with fc-list where there is no font cache, as in a fresh image; benchopt imports it) and
    this process's provenance (its code state comes from git; the record is cached, and plan
    and capacity key calibrations with it). The only processes a unit session starts, outside
    its tests."""
    import deepinv  # noqa: F401
    import matplotlib.font_manager  # noqa: F401
    import torch  # noqa: F401

    import provenance

    provenance.collect()


@pytest.fixture(autouse=True)
def unit_tests_start_no_process(request):
    """Tests marked ``unit`` run in the test process only: each way of starting a process
    fails them."""
    if request.node.get_closest_marker("unit") is None:
        yield
        return
    request.getfixturevalue("test_process_stack")
    with pytest.MonkeyPatch.context() as patch:
        for owner, name in PROCESS_STARTERS:
            if hasattr(owner, name):
                patch.setattr(owner, name, refuse_process_start(
                    f"{getattr(owner, '__name__', owner)}.{name}"))
        yield


# Variables pytest and the libraries manage themselves (OpenMP at import, inductor on use).
OWN_ENVIRONMENT = ("PYTEST_CURRENT_TEST", "KMP_", "TORCHINDUCTOR_")


@pytest.fixture(autouse=True)
def no_leaked_environment():
    """A test that changes os.environ must restore it (monkeypatch does): a variable left
    behind would reach every later test of the worker and their processes."""
    before = dict(os.environ)
    yield
    after = dict(os.environ)
    changed = sorted(key for key in before.keys() | after.keys()
                     if before.get(key) != after.get(key)
                     and not key.startswith(OWN_ENVIRONMENT))
    if changed:
        os.environ.clear()
        os.environ.update(before)
        pytest.fail(f"the test left environment variables changed: {', '.join(changed)} "
                    f"(use monkeypatch)", pytrace=False)


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
    """A scalebench cache holding the miniature walnut (tests/support/walnut_fixture.py)."""
    from tests.support.walnut_fixture import walnut_cache as fill

    return fill(tmp_path_factory.mktemp("cache"))


@pytest.fixture(scope="module")
def many_views_walnut_cache(tmp_path_factory) -> Path:
    """The miniature walnut with MANY_VIEWS views per orbit, for configs that name more
    views than the small one has (validation checks them against the fetched count)."""
    from tests.support.walnut_fixture import MANY_VIEWS
    from tests.support.walnut_fixture import walnut_cache as fill

    return fill(tmp_path_factory.mktemp("cache"), views=MANY_VIEWS)


@pytest.fixture(scope="module")
def in_walnut_cache(walnut_cache):
    """SCALEBENCH_CACHE is ``walnut_cache`` for the module (walnut_conebeam reads it)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SCALEBENCH_CACHE", str(walnut_cache))
        yield walnut_cache


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's headless Chromium (installed with apt when missing; tests/support/browser.py)."""
    from tests.support.browser import BrowserUnavailable, ensure_chromium_installed

    try:
        return ensure_chromium_installed()
    except BrowserUnavailable as error:
        pytest.skip(f"no headless browser: {error}")


@pytest.fixture
def empty_hub(tmp_path, monkeypatch):
    """A torch hub cache without deepinv's published files (as on a fresh offline machine)."""
    import torch

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.setattr(torch.hub, "_hub_dir", None)
    return tmp_path / "torch" / "hub" / "checkpoints"


@pytest.fixture
def write_config(tmp_path):
    from tests.support.cli import write_experiment

    def write(experiment: dict, name: str = "experiment.yml") -> Path:
        return write_experiment(tmp_path, experiment, name)
    return write


@pytest.fixture(scope="session")
def campaign(tmp_path_factory):
    """A real tiny campaign: strong and weak series over 1 and 2 ranks (tests/support)."""
    from tests.support.campaigns import run_campaign

    return run_campaign(tmp_path_factory.mktemp("campaign"))


@pytest.fixture(scope="session")
def seed_campaign(tmp_path_factory):
    """The seed's example campaign: three results files of real runs and their report."""
    from tests.support.campaigns import run_seed_campaign

    return run_seed_campaign(tmp_path_factory.mktemp("seed_campaign"))


@pytest.fixture(scope="session")
def ct_tuning(tmp_path_factory):
    """A real eight-trial tuning of a seconds-long CT problem (tests/support/tuning.py)."""
    from tests.support.tuning import run_ct_tuning

    return run_ct_tuning(tmp_path_factory.mktemp("ct_tuning"))
