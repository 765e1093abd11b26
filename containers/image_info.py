"""What the scalebench image holds and how to use it (printed when it runs without a command)."""

from __future__ import annotations

import json
import os
from importlib import metadata
from pathlib import Path

from provenance.process import PACKAGES, image_identity
from provenance.sif import SifError

BUILD_INFO = Path("/opt/scalebench/build-info.json")
USAGE = """\
Usage:
  docker run --rm --gpus all -v $PWD/results:/results IMAGE scalebench run CONFIG --output NAME
  apptainer run --nv --bind $PWD/results:/results scalebench.sif scalebench run CONFIG
  apptainer run --bind $PWD/results:/results scalebench.sif benchopt run \\
      /opt/scalebench/src/benchmark_inference --config /results/CONFIG.yml
  ... IMAGE scalebench replay /results/NAME.parquet      (bit-for-bit re-run, same image)
  ... IMAGE scalebench-image-test                         (self-test: imports, tiny run, GPU)
Results are written to /results; bind a host folder there (benchopt's outputs folder of
/opt/scalebench/src/benchmark_inference and benchmark_training is /results). Experiments:
/opt/scalebench/src/configs. Pretrained weights: $TORCH_HOME/hub/checkpoints. Nothing is
downloaded at run time (SCALEBENCH_OFFLINE=1, HF_HUB_OFFLINE=1)."""


def main() -> None:
    info = json.loads(BUILD_INFO.read_text()) if BUILD_INFO.is_file() else {}
    print("scalebench image")
    print(f"  code: commit {info.get('commit', 'unknown')}"
          f"{' (dirty)' if info.get('dirty') else ''}, built {info.get('build_date', '?')}")
    try:
        digest, labels = image_identity()  # what every row records
    except (SifError, OSError) as error:  # the SIF's path is not visible inside (--contain)
        digest, labels = f"unavailable ({error})", "{}"
    print(f"  digest: {'not handed in' if digest == 'none' else digest}")
    versions = ", ".join(f"{name} {metadata.version(name)}" for name in PACKAGES.values())
    print(f"  packages: {versions}")
    weights = Path(os.environ.get("TORCH_HOME", "/opt/scalebench/torch")) / "hub/checkpoints"
    names = sorted(p.name for p in weights.glob("*.pth")) if weights.is_dir() else []
    print(f"  weights: {', '.join(names) or 'none'}")
    for key, value in sorted(json.loads(labels).items()):
        print(f"  label {key}={value}")
    print(USAGE)


if __name__ == "__main__":
    main()
