"""Real container images, built once per test session (the image group's modules,
tests/conftest.py), and the SLURM cluster (``slurm_cluster``: one per worker, shared by the
modules that take it)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.slurm_cluster import slurm_cluster_fixture  # noqa: F401 (registers it)


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
    ``base``, ``weights`` and ``build_options`` rebuild it the same way (``apptainer`` is
    first on PATH for the session: the ``apptainer_on_path`` fixture)."""

    path: Path
    digest: str
    base: ContainerBase
    weights: Path
    build_options: tuple[str, ...]


# The disk the image group takes at its peak, the podman build of the image (its layers
# staged while stored): 16.3 GB over the run's start, measured on a 2-core test machine
# (df's used space sampled every 15 s through `bash .ci/run`), and a margin.
IMAGE_DISK_BYTES = 20 * 2**30


@pytest.fixture(scope="session")
def container_base() -> ContainerBase:
    """Podman in a private storage root with the stand-in base (shared by both builds)."""
    from tests.support.container_tools import Podman, ensure_tools, stand_in_base

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
    """The folder of the apptainer the tests use (installed, else tests/support/apptainer_tools.py's
    wrapper), first on PATH for the session. Fails in one line when neither can start."""
    from tests.support.apptainer_tools import apptainer_on_path as folder_of_apptainer

    folder = folder_of_apptainer()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
        yield folder


@pytest.fixture(scope="session")
def scalebench_sif(apptainer_on_path, container_base, tmp_path_factory):
    """containers/scalebench.def built once per session, every line the committed one but
    the bootstrap (the stand-in base's archive)."""
    from tests.support.apptainer_tools import build_test_sif, sif_build_options
    from tests.support.container_tools import seeded_weights

    folder = tmp_path_factory.mktemp("sif")
    weights = seeded_weights(folder / "weights")
    options = sif_build_options(folder)
    started = time.monotonic()
    path = folder / "scalebench.sif"
    digest = build_test_sif(path, container_base.reference, container_base.archive, weights,
                            options)
    seconds = time.monotonic() - started
    print(f"\nSIF built in {seconds:.0f} s, {path.stat().st_size / 2**20:.0f} MiB")
    yield BuiltSif(path, digest, container_base, weights, options)
    path.unlink()  # gigabytes that pytest's kept temporary folders would hold on to
