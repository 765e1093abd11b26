"""Put this project into the image's Python environment (run once by both image builds).

The project itself is not pip-installed: an editable install needs a recent setuptools at build
time, which is neither in the lock nor in every base's python3-venv. Instead its folder goes on
the venv's path (what an editable install does), its console scripts are written from
pyproject.toml, and build-info.json records the commit the image was built from. Every file
written here has fixed content for fixed inputs: no timestamps beyond SOURCE_DATE_EPOCH.
"""

from __future__ import annotations

import compileall
import json
import os
import py_compile
import shutil
import sys
import tomllib
from datetime import UTC, datetime
from pathlib import Path

PREFIX = Path("/opt/scalebench")
SOURCE = PREFIX / "src"
RESULTS = Path("/results")
SCRIPT = '#!{python}\nimport sys\nfrom {module} import {function}\nsys.exit({function}())\n'


def build_info(environ: os._Environ | dict) -> dict:
    """Commit, dirty flag and diff hash handed in as build arguments; date from the epoch."""
    epoch = int(environ.get("SOURCE_DATE_EPOCH") or 0)
    return {"commit": environ.get("SCALEBENCH_COMMIT") or "unknown",
            "dirty": environ.get("SCALEBENCH_DIRTY", "true") != "false",
            "diff_sha256": environ.get("SCALEBENCH_DIFF_SHA256", ""),
            "build_date": datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}


def write_scripts(venv_bin: Path) -> None:
    """Console scripts of [project.scripts], as pip would write them."""
    scripts = tomllib.loads((SOURCE / "pyproject.toml").read_text())["project"]["scripts"]
    for name, target in sorted(scripts.items()):
        module, function = target.split(":")
        path = venv_bin / name
        path.write_text(SCRIPT.format(python=venv_bin / "python", module=module,
                                      function=function))
        path.chmod(0o755)


def install_helpers(bin_dir: Path) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SOURCE / "containers/entrypoint.sh", bin_dir / "scalebench-entrypoint")
    (bin_dir / "scalebench-image-test").write_text(
        f"#!/bin/sh\nexec {sys.executable} {SOURCE}/containers/image_test.py \"$@\"\n")
    for name in ("scalebench-entrypoint", "scalebench-image-test"):
        (bin_dir / name).chmod(0o755)


def main() -> None:
    site = Path(sys.prefix) / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    (site / "site-packages" / "scalebench-src.pth").write_text(f"{SOURCE}\n")
    write_scripts(Path(sys.prefix) / "bin")
    install_helpers(PREFIX / "bin")
    (PREFIX / "build-info.json").write_text(
        json.dumps(build_info(os.environ), indent=2, sort_keys=True) + "\n")
    # Results land in /results (bind a host folder there): the image itself may be read-only.
    RESULTS.mkdir(exist_ok=True)
    for benchmark in sorted(SOURCE.glob("benchmark_*")):
        outputs = benchmark / "outputs"
        shutil.rmtree(outputs, ignore_errors=True)
        outputs.symlink_to(RESULTS)
    # Hash-checked .pyc files do not depend on file times, so two builds write the same bytes.
    compileall.compile_dir(SOURCE, quiet=1, workers=1,
                           invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)


if __name__ == "__main__":
    main()
