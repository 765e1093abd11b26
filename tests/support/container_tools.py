"""Real container tooling for the tests: podman in a private storage root, a local base.

No container registry is reachable from the test machines, so the base image is a stand-in
made with mmdebstrap from the packages of the distribution release under the production base
(containers/base-image.toml), and podman runs with runc and explicit ulimits (crun and the
default ulimits fail on these hosts). Missing tools are installed with apt-get (as root).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import pytest

from containers.generate import read_lock
from tests.support.apt import apt_install
from tests.support.paths import REPO

TOOLS = {"podman": "podman", "buildah": "buildah", "runc": "runc", "mmdebstrap": "mmdebstrap"}
CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=1024:20000", "nproc=4096:4096"]
[engine]
runtime = "runc"
"""
# The images' base and interpreter (containers/base-image.toml) and the lock they pin.
BASE_IMAGE = tomllib.loads((REPO / "containers/base-image.toml").read_text())
DISTRIBUTION = BASE_IMAGE["base"]["distribution"]
IMAGE_PYTHON = BASE_IMAGE["python"]
LOCK = read_lock((REPO / "constraints.txt").read_text())
BASE_TAG = f"localhost/{DISTRIBUTION['name']}:{DISTRIBUTION['release']}-minbase"
# Debian packages the Ubuntu archive keys (from trixie on), checked by Debian's signed archive.
UBUNTU_KEYRING = ("ubuntu-archive-keyring", "trixie",
                  "deb http://deb.debian.org/debian trixie main",
                  "usr/share/keyrings/ubuntu-archive-keyring.gpg")
BUILD_MOUNT = "/run/scalebench-build"  # pip settings for the build only, mounted read-only
HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
# The stand-in base's root, made once per machine (mmdebstrap takes minutes).
BASE_CACHE = Path(os.environ.get("SCALEBENCH_TEST_BASE_CACHE",
                                 "/var/cache/scalebench-tests/base"))
BASE_MAX_AGE_S = 7 * 86400


def ensure_tools() -> None:
    """Install podman, buildah, runc and mmdebstrap when missing (idempotent)."""
    missing = [package for command, package in TOOLS.items() if shutil.which(command) is None]
    if not missing:
        return
    if os.geteuid() != 0:
        pytest.skip(f"container tests need {', '.join(missing)}; installing them needs root")
    apt_install(missing)


class Podman:
    """podman with its own storage under ``root``; ``command`` is the engine prefix."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.conf = root / "containers.conf"
        self.conf.write_text(CONTAINERS_CONF)
        self.command = ["podman", "--root", str(root / "storage"), "--runroot",
                        str(root / "run"), "--storage-driver", "overlay"]

    def __call__(self, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
        return subprocess.run([*self.command, *args], capture_output=True, text=True,
                              timeout=timeout, check=False, env=self.environment())

    def environment(self) -> dict[str, str]:
        return {**os.environ, "CONTAINERS_CONF": str(self.conf)}

    def remove_everything(self) -> None:
        self("rm", "--all", "--force")
        self("system", "reset", "--force")
        shutil.rmtree(self.root, ignore_errors=True)


def _ubuntu_keyring(folder: Path) -> Path:
    package, release, source, path = UBUNTU_KEYRING
    root = folder / "keyring-root"
    subprocess.run(["mmdebstrap", "--variant=extract", f"--include={package}", release,
                    str(root), source], check=True, capture_output=True, timeout=600)
    return root / path


def _base_recipe() -> tuple[list[str], list[str]]:
    """mmdebstrap options and apt sources of the stand-in (the keyring option added later)."""
    # What a distribution's own container base holds beyond its required packages: apt, and
    # for Ubuntu (where both are only "important") its archive keys.
    packages = ["ca-certificates", "apt"] + (["ubuntu-keyring"]
                                             if DISTRIBUTION["name"] == "ubuntu" else [])
    components = " ".join(DISTRIBUTION["components"])
    sources = [f"deb {DISTRIBUTION['mirror']} {suite} {components}"
               for suite in DISTRIBUTION["suites"]]
    return ["--variant=minbase", f"--include={','.join(packages)}"], sources


def _make_base_tarball(tarball: Path) -> None:
    options, sources = _base_recipe()
    # apt verifies signatures as its unprivileged user: the keyring must be world-readable,
    # which pytest's private temporary folders are not.
    keys = Path(tempfile.mkdtemp(prefix="scalebench-keyring-"))
    keys.chmod(0o755)
    try:
        if DISTRIBUTION["name"] == "ubuntu":
            options.append(f"--keyring={_ubuntu_keyring(keys)}")
        made = subprocess.run(["mmdebstrap", *options, DISTRIBUTION["release"], str(tarball),
                               *sources], capture_output=True, text=True, timeout=900,
                              check=False)
    finally:
        shutil.rmtree(keys, ignore_errors=True)
    assert made.returncode == 0, made.stderr[-3000:]


def cached_base_tarball(cache: Path = BASE_CACHE) -> Path:
    """The stand-in's root as a tarball, made with mmdebstrap once per machine and recipe
    (minutes) and remade once older than BASE_MAX_AGE_S (the archive moves on)."""
    recipe = json.dumps([DISTRIBUTION, *_base_recipe(), UBUNTU_KEYRING], sort_keys=True)
    tarball = cache / f"{hashlib.sha256(recipe.encode()).hexdigest()[:16]}.tar"
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two sessions on one machine make it once
        if not tarball.is_file() or time.time() - tarball.stat().st_mtime > BASE_MAX_AGE_S:
            partial = tarball.with_suffix(".partial.tar")
            _make_base_tarball(partial)
            partial.replace(tarball)
    return tarball


def stand_in_base(podman: Podman) -> str:
    """A minimal root of the production base's distribution release, as NAME@sha256:DIGEST."""
    imported = podman("import", str(cached_base_tarball()), BASE_TAG)
    assert imported.returncode == 0, imported.stderr
    digest = podman("image", "inspect", "--format", "{{.Digest}}", BASE_TAG).stdout.strip()
    return f"{BASE_TAG}@{digest}"


def _host_pip_locations() -> tuple[list[str], list[str]]:
    """Local find-links folders and file:// indexes of the host's pip configuration."""
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True,
                            text=True, check=False).stdout
    find_links, indexes = [], []
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        values = value.strip().strip("'\"").split()
        if key.endswith(".find-links"):
            find_links += [v for v in values if Path(v).is_dir()]
        elif key.endswith(".extra-index-url"):
            indexes += [v for v in values if v.startswith("file://")]
    return sorted(set(find_links)), sorted(set(indexes))


def pip_settings(folder: Path, inside: str) -> list[tuple[str, str]]:
    """(host path, path in the build container) mounts that let pip in a build use the host's
    local wheels and CA, with ``inside``/pip.conf pointing at them.

    Everything is mounted read-only under ``inside`` at build time only and handed to pip via
    PIP_CONFIG_FILE: the image keeps none of it (only the empty mount point). Packages the host
    has no local copy of still come from PyPI, through the host's proxy with its CA bundle.
    """
    find_links, indexes = _host_pip_locations()
    settings = folder / "pip-settings"
    settings.mkdir()
    mounts = [(str(settings), inside)]
    inside_links, inside_indexes = [], []
    for number, location in enumerate(find_links + [i.removeprefix("file://") for i in indexes]):
        source = Path(location)
        root = source.parent if source.name == "simple" else source
        (settings / f"local{number}").mkdir()
        mounts.append((str(root), f"{inside}/local{number}"))
        if location in find_links:
            inside_links.append(f"{inside}/local{number}")
        else:
            inside_indexes.append(f"file://{inside}/local{number}/simple")
    lines = ["[global]", f"cert = {inside}/ca-certificates.crt"]
    if inside_links:
        lines.append(f"find-links = {' '.join(inside_links)}")
    if inside_indexes:
        lines.append(f"extra-index-url = {' '.join(inside_indexes)}")
    (settings / "pip.conf").write_text("\n".join(lines) + "\n")
    (settings / "ca-certificates.crt").touch()
    mounts.append((str(HOST_CA), f"{inside}/ca-certificates.crt"))
    return mounts


def local_pip_options(folder: Path) -> list[str]:
    """podman build options for pip_settings (mounted at BUILD_MOUNT)."""
    options = ["--network", "host", "--build-arg", f"PIP_CONFIG_FILE={BUILD_MOUNT}/pip.conf"]
    for source, target in pip_settings(folder, BUILD_MOUNT):
        options += ["-v", f"{source}:{target}:ro"]
    return options


def seeded_weights(folder: Path) -> Path:
    """A weights folder: a seeded random DnCNN (gray) saved under deepinv's published name,
    with its real checksum in manifest.txt, so that the image's verification path runs."""
    import deepinv as dinv
    import torch

    folder.mkdir(parents=True)
    torch.manual_seed(0)
    model = dinv.models.DnCNN(in_channels=1, out_channels=1, pretrained=None)
    path = folder / "dncnn_sigma2_gray.pth"
    torch.save(model.state_dict(), path)
    checksum = hashlib.sha256(path.read_bytes()).hexdigest()
    (folder / "manifest.txt").write_text(
        f"{checksum} {path.name} test://seeded-random-dncnn-made-by-the-test\n")
    return folder


def run_python(*args: str, timeout: int = 120, **kwargs) -> subprocess.CompletedProcess:
    """This interpreter with ``args`` in the repository, its output captured."""
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, check=False, **kwargs)


def pinned_wheels(folder: Path, names: tuple[str, ...], python: str) -> Path:
    """Wheels of ``names`` and of their dependencies, at the lock's versions, for ``python``
    (MAJOR.MINOR): a local index for pip inside a container, which keeps no pip settings."""
    constraints = REPO / "constraints.txt"
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:",
                    "--python-version", python, "-c", str(constraints), "-d", str(folder),
                    *names], check=True, capture_output=True, timeout=600)
    return folder
