"""The Apptainer half of the bundle, for real: scalebench.sif built from
containers/scalebench.def (only the bootstrap lines name the stand-in base's archive) and run
the way users run it. The SIF is built once per session (conftest's `scalebench_sif`), with
Debian sid's apptainer from tests/support/apptainer_tools.py where none is installed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml
from dockerfile_parse import DockerfileParser

from provenance.results import read_results
from tests.support.cli import tiny_experiment
from tests.support.container_tools import LOCK
from tests.support.paths import REPO

pytestmark = pytest.mark.slow


SRC = "/opt/scalebench/src"


def apptainer(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    return subprocess.run(["apptainer", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def host(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """python -m scalebench ARGS in the host's venv."""
    return subprocess.run([sys.executable, "-m", "scalebench", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout, check=False)


def output(result: subprocess.CompletedProcess) -> str:
    return result.stdout[-3000:] + result.stderr[-3000:]


def sif_labels(sif: Path) -> dict[str, str]:
    shown = apptainer("inspect", "--json", "--labels", str(sif))
    assert shown.returncode == 0, shown.stderr
    return json.loads(shown.stdout)["data"]["attributes"]["labels"]


def test_sif_carries_the_docker_labels_and_build_info(scalebench_sif):
    from containers.build import build_arguments
    from provenance.process import code_state

    labels = sif_labels(scalebench_sif.path)
    arguments = build_arguments(scalebench_sif.base.reference)
    docker = {key: re.sub(r"\$\{(\w+)\}", lambda m: arguments[m.group(1)], value)
              for key, value in DockerfileParser(str(REPO / "containers/Dockerfile"),
                                                 env_replace=False).labels.items()}
    assert {key: labels.get(key) for key in docker} == docker
    assert labels["org.scalebench.torch"] == LOCK["torch"]
    assert labels["org.opencontainers.image.base.digest"] == \
        scalebench_sif.base.reference.split("@")[1]
    # Chosen compression, recorded; the build date is the inputs', not the build's clock.
    assert labels["org.scalebench.squashfs-compression"] == "zstd:3"
    assert labels["org.label-schema.build-date"] == arguments["CREATED"]
    info = apptainer("exec", str(scalebench_sif.path), "cat", "/opt/scalebench/build-info.json")
    assert info.returncode == 0, info.stderr
    state = code_state(REPO)
    assert json.loads(info.stdout) == {
        "commit": state["code_commit"], "dirty": state["code_dirty"],
        "diff_sha256": state["code_diff_sha256"], "build_date": arguments["CREATED"]}


def test_sif_without_a_command_describes_itself(scalebench_sif):
    shown = apptainer("run", str(scalebench_sif.path))
    assert shown.returncode == 0, output(shown)
    assert shown.stdout.startswith("scalebench image")
    assert f"digest: {scalebench_sif.digest}" in shown.stdout
    assert f"torch {LOCK['torch']}" in shown.stdout and "dncnn_sigma2_gray.pth" in shown.stdout
    assert "benchopt run \\\n      /opt/scalebench/src/benchmark_inference" in shown.stdout
    assert "label org.scalebench.squashfs-compression=zstd:3" in shown.stdout


def test_apptainer_test_runs_the_self_test(scalebench_sif):
    tested = apptainer("test", str(scalebench_sif.path))
    assert tested.returncode == 0, output(tested)
    assert "image test passed" in tested.stdout
    for benchmark in ("benchmark_inference", "benchmark_training"):
        assert f"ok: tiny CPU run of {benchmark}" in tested.stdout


@pytest.fixture(scope="module")
def sif_results(scalebench_sif, tmp_path_factory) -> Path:
    """A host results folder with the rows of `scalebench run` in the SIF (tiny.parquet),
    bound at /results as users do."""
    results = tmp_path_factory.mktemp("sif-results")
    experiment = tiny_experiment()
    experiment["solver"][1]["denoiser"] = {**experiment["solver"][1]["denoiser"],
                                           "denoiser": "dncnn", "pretrained": "hub"}
    (results / "tiny.yml").write_text(yaml.safe_dump(experiment, sort_keys=False))
    ran = apptainer("run", "--bind", f"{results}:/results", str(scalebench_sif.path),
                    "scalebench", "run", "/results/tiny.yml", "--output", "tiny")
    assert ran.returncode == 0, output(ran)
    return results


def assert_rows_record_the_sif(rows: pd.DataFrame, sif: Path, digest: str) -> None:
    assert set(rows["prov_image_digest"]) == {digest}
    recorded = [json.loads(value) for value in set(rows["prov_image_labels"])]
    assert recorded == [sif_labels(sif)]


def test_scalebench_run_in_the_sif_records_its_digest_and_labels(scalebench_sif, sif_results):
    rows = pd.read_parquet(sif_results / "tiny.parquet")
    assert_rows_record_the_sif(rows, scalebench_sif.path, scalebench_sif.digest)
    assert "dncnn" in set(rows["p_solver_denoiser"])  # the baked, verified weights


def test_benchopt_run_in_the_sif_writes_rows_to_the_bound_results(scalebench_sif, tmp_path):
    """The mission's command, with the benchmark folder the image holds."""
    results = tmp_path / "results"
    results.mkdir()
    (results / "tiny.yml").write_text(yaml.safe_dump(tiny_experiment(), sort_keys=False))
    ran = apptainer("run", "--bind", f"{results}:/results", str(scalebench_sif.path),
                    "benchopt", "run", f"{SRC}/benchmark_inference", "--config",
                    "/results/tiny.yml")
    assert ran.returncode == 0, output(ran)
    written = sorted(results.glob("*.parquet"))
    assert written, output(ran)
    # benchopt's own file names the objective's columns objective_prov_*.
    assert_rows_record_the_sif(read_results(written[-1]), scalebench_sif.path,
                               scalebench_sif.digest)


def test_training_benchmark_runs_in_the_sif(scalebench_sif, tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    experiment = {"objective": ["supervised_training"],
                  "dataset": [{"synthetic": {"image_size": 32, "task": "denoising"}}],
                  "solver": [{"unrolled_pgd": {"num_stages": 2, "denoiser_width": 8,
                                               "denoiser_depth": 3, "patch_size": 16,
                                               "max_iter": 2, "device": "cpu"}}],
                  "n-repetitions": 1, "timeout": 300}
    (results / "train.yml").write_text(yaml.safe_dump(experiment, sort_keys=False))
    ran = apptainer("run", "--bind", f"{results}:/results", str(scalebench_sif.path),
                    "scalebench", "run", "/results/train.yml", "--output", "train")
    assert ran.returncode == 0, output(ran)
    rows = pd.read_parquet(results / "train.parquet")
    assert len(rows) >= 2
    assert_rows_record_the_sif(rows, scalebench_sif.path, scalebench_sif.digest)


def verdicts(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stdout.splitlines()
            if line.startswith(("MATCH", "DIFFER", "REFUSED"))]


def test_replay_in_the_same_sif_matches_bit_for_bit(scalebench_sif, sif_results):
    replayed = apptainer("run", "--bind", f"{sif_results}:/results", str(scalebench_sif.path),
                         "scalebench", "replay", "/results/tiny.parquet")
    assert replayed.returncode == 0, output(replayed)
    found = verdicts(replayed)
    assert len(found) == 2 and all(v.startswith("MATCH") for v in found), found


def test_replay_in_the_host_venv_refuses_on_the_image_digest(sif_results):
    replayed = host("replay", str(sif_results / "tiny.parquet"))
    assert replayed.returncode != 0
    found = verdicts(replayed)
    assert len(found) == 2 and all(v.startswith("REFUSED") for v in found), found
    assert all("image_digest" in v for v in found), found


def test_verify_image_of_the_sif(scalebench_sif, tmp_path):
    sif = str(scalebench_sif.path)
    same = host("verify-image", sif, "--digest", scalebench_sif.digest)
    assert same.returncode == 0 and "verified" in same.stdout, same.stderr
    other = host("verify-image", sif, "--digest", "sha256:" + "1" * 64)
    assert other.returncode == 1 and "another image" in other.stderr
    # A truncated copy (a download cut short) is bad input, as are a missing file and a
    # malformed digest: one line each, exit 2.
    truncated = tmp_path / "truncated.sif"
    with scalebench_sif.path.open("rb") as stream:
        truncated.write_bytes(stream.read(1 << 20))
    for image, digest, message in (
            (str(truncated), scalebench_sif.digest, "corrupt or truncated SIF"),
            (str(tmp_path / "absent.sif"), scalebench_sif.digest, "does not exist"),
            (sif, "sha256:abc", "64 lower-case hex")):
        bad = host("verify-image", image, "--digest", digest)
        assert bad.returncode == 2 and message in bad.stderr, bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1


def test_a_config_outside_the_binds_is_one_line_naming_the_bind(scalebench_sif, tmp_path):
    """--contain: the host's /tmp is not visible, so the config's folder is not either."""
    results = tmp_path / "results"
    configs = tmp_path / "configs"
    results.mkdir()
    configs.mkdir()
    (configs / "tiny.yml").write_text(yaml.safe_dump(tiny_experiment(), sort_keys=False))
    ran = apptainer("run", "--contain", "--bind", f"{results}:/results",
                    str(scalebench_sif.path), "scalebench", "run", str(configs / "tiny.yml"))
    assert ran.returncode == 2, output(ran)
    assert ran.stderr.count("\n") == 1, ran.stderr
    assert f"bind {configs} (e.g. --bind {configs}:{configs})" in ran.stderr
    assert not list(results.iterdir())


def test_apptainer_refuses_a_missing_bind_or_sif_in_one_line(scalebench_sif, tmp_path):
    """Apptainer's own refusals, before anything runs: one FATAL line naming the path."""
    truncated = tmp_path / "truncated.sif"
    with scalebench_sif.path.open("rb") as stream:
        truncated.write_bytes(stream.read(1 << 20))
    missing = tmp_path / "absent"
    for args, named in (
            (["--bind", f"{missing}:/results", str(scalebench_sif.path)], str(missing)),
            ([str(tmp_path / "absent.sif")], str(tmp_path / "absent.sif")),
            ([str(truncated)], "image is corrupted")):
        ran = apptainer("run", *args, "true")
        assert ran.returncode != 0
        lines = ran.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("FATAL:") and named in lines[0], lines


def test_a_rebuild_of_the_same_inputs_is_the_same_image(scalebench_sif, tmp_path):
    """A second build of the definition from the same commit, base, weights and
    SOURCE_DATE_EPOCH: another file (Apptainer 1.4.5 stamps a random ID and the build time),
    the same image by the digest rows record and verify-image checks."""
    import hashlib
    import time

    from tests.support.apptainer_tools import build_test_sif

    again = tmp_path / "again.sif"
    started = time.monotonic()
    digest = build_test_sif(again, scalebench_sif.base.reference, scalebench_sif.base.archive,
                            scalebench_sif.weights, scalebench_sif.build_options)
    print(f"\nSIF rebuilt in {time.monotonic() - started:.0f} s")
    try:
        with scalebench_sif.path.open("rb") as first, again.open("rb") as second:
            assert hashlib.file_digest(first, "sha256").digest() != \
                hashlib.file_digest(second, "sha256").digest()
        assert digest == scalebench_sif.digest
        verified = host("verify-image", str(again), "--digest", scalebench_sif.digest)
        assert verified.returncode == 0, verified.stderr
    finally:
        again.unlink()
