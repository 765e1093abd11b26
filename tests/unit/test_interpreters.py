"""requires-python allows exactly the interpreters that every installed pin allows.

The images run another interpreter than the host (containers/base-image.toml); the project's
tests on it run in tests/system/test_containers.py. Pins installed only in the images (astra-toolbox
and its CUDA 12 wheels) declare no narrower range; that wheels exist for every allowed minor
version is checked with `pip install --dry-run --python-version X.Y` (docs/installation.md).
"""

from __future__ import annotations

import platform
import tomllib
from importlib import metadata

from packaging.specifiers import SpecifierSet

from containers.generate import read_lock
from tests.support.container_tools import IMAGE_PYTHON
from tests.support.paths import REPO

# Every release a range could name, from before the lowest pin's floor to after the highest.
CANDIDATES = [f"3.{minor}.{micro}" for minor in range(9, 17) for micro in range(0, 15)]


def project_range() -> SpecifierSet:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return SpecifierSet(project["requires-python"])


def pins_range() -> tuple[SpecifierSet, list[str]]:
    """The intersection of the Requires-Python of every pin installed here, and their names."""
    combined, read = SpecifierSet(), []
    for name in read_lock((REPO / "constraints.txt").read_text()):
        try:
            declared = metadata.metadata(name).get("Requires-Python")
        except metadata.PackageNotFoundError:
            continue
        read.append(name)
        if declared:
            combined &= SpecifierSet(declared)
    return combined, read


def test_requires_python_is_what_every_pin_allows():
    project = project_range()
    pins, read = pins_range()
    assert {"torch", "torchvision", "deepinv", "benchopt", "numpy"} <= set(read)
    wrong = [version for version in CANDIDATES if (version in project) != (version in pins)]
    assert not wrong, f"requires-python {project} and the pins ({pins}) disagree on {wrong}"


def test_requires_python_allows_the_host_and_the_image_interpreters():
    image = IMAGE_PYTHON
    project = project_range()
    assert platform.python_version() in project
    assert f"{image['version']}.0" in project
