"""The Docker/OCI image built with podman and run for real: the benchmark and its replay bit
for bit, the launcher's ranks in the image, the host compared with the image
(docs/comparing.md's podman block), its self-description and self-test, the pinned
interpreter, verify-image by ID."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.support.cli import tiny_experiment
from tests.support.comparing_page import (
    OUTPUTS,
    PODMAN_BLOCK_TEST,
    clone,
    run_block,
    shell,
)
from tests.support.container_tools import (
    BASE_IMAGE,
    BASE_TAG,
    DISTRIBUTION,
    IMAGE_PYTHON,
    LOCK,
    Podman,
    local_pip_options,
    pinned_wheels,
    run_python,
    seeded_weights,
)
from tests.support.paths import REPO


@pytest.fixture(scope="module")
def image(container_base, tmp_path_factory):
    """The Dockerfile built with podman from the session's stand-in base: (podman, image ID)."""
    folder = tmp_path_factory.mktemp("image")
    podman = container_base.podman
    from containers.build import build

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CONTAINERS_CONF", str(podman.conf))  # read by the podman build() calls
        started = time.monotonic()
        weights = seeded_weights(folder / "weights")
        # Compressed layer blobs: a commit stages each new layer twice on disk before storing
        # it, and the test machines' disks are shared (the image ID does not depend on it).
        options = [*local_pip_options(folder), "--disable-compression=false"]
        digest = build(podman.command, "localhost/scalebench:test", container_base.reference,
                       weights, options)
        print(f"\npodman image built in {time.monotonic() - started:.0f} s")
        yield podman, digest
    # The base stays for the session's other builds; the image's gigabytes go now.
    podman("rmi", "--force", digest)
    podman("image", "prune", "--force")


def rows_of_the_image(podman: Podman, digest: str, results: Path) -> tuple[pd.DataFrame, dict]:
    """The rows of ``results`` and the image's labels, after checking that every row records
    the image's ID and those labels."""
    rows = pd.read_parquet(results)
    labels = json.loads(podman("image", "inspect", "--format", "{{json .Config.Labels}}",
                               digest).stdout)
    assert set(rows["prov_image_digest"]) == {digest}
    assert [json.loads(value) for value in set(rows["prov_image_labels"])] == [labels]
    return rows, labels


def in_image(podman: Podman, digest: str, results: Path, *command: str):
    """Run ``command`` through the launch helper, results folder bound at /results."""
    return run_python("-m", "scalebench.launch.containers", "run", digest, "--engine",
               " ".join(podman.command),
               "--no-gpus", "--bind", f"{results}:/results", "--", *command, timeout=900,
               env=podman.environment())


@pytest.mark.slow
def test_image_runs_the_benchmark_and_replays_it_bit_for_bit(image, tmp_path):
    podman, digest = image
    results = tmp_path / "results"
    results.mkdir()
    experiment = tiny_experiment()
    experiment["solver"][1]["denoiser"] = {**experiment["solver"][1]["denoiser"],
                                           "denoiser": "dncnn", "pretrained": "hub"}
    (results / "tiny.yml").write_text(yaml.safe_dump(experiment, sort_keys=False))
    ran = in_image(podman, digest, results, "scalebench", "run", "/results/tiny.yml",
                   "--output", "tiny")
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    rows, labels = rows_of_the_image(podman, digest, results / "tiny.parquet")
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert set(rows["prov_code_commit"]) == {head}
    assert labels["org.opencontainers.image.revision"] == head
    assert labels["org.scalebench.torch"] == LOCK["torch"]
    assert "dncnn" in set(rows["p_solver_denoiser"])  # the baked, verified weights were used
    replayed = in_image(podman, digest, results, "scalebench", "replay", "/results/tiny.parquet")
    assert replayed.returncode == 0, replayed.stdout[-2000:] + replayed.stderr[-2000:]
    verdicts = [line for line in replayed.stdout.splitlines() if line.startswith(("MATCH",
                                                                                "DIFFER"))]
    assert len(verdicts) == 2 and all(v.startswith("MATCH") for v in verdicts), verdicts


@pytest.mark.slow
def test_launcher_runs_steps_and_ranks_in_the_image(image, tmp_path):
    """``scalebench run --runtime podman``: two local ranks, each in its own container
    (scalebench.launch.containers' command line), rows recording the image's ID and labels."""
    podman, digest = image
    results = tmp_path / "results"
    results.mkdir()
    solver = {"max_iter": 2, "device": "cpu", "denoiser": "dncnn", "denoiser_sigma": 0.05,
              "tile_size": 16, "tile_overlap": 8, "distribute_physics": True,
              "distribute_denoiser": True, "num_threads": 1}
    dataset = {"tomography_2d": {"image_size": 48, "num_angles": 12, "num_operators": 4,
                                 "noise_level": 0.05}}
    experiment = tiny_experiment(dataset=[dataset], solver=[{"pnp": solver}])
    (results / "two.yml").write_text(yaml.safe_dump(experiment, sort_keys=False))
    env = {**podman.environment(), "SB_ENGINE": " ".join(podman.command)}
    ran = run_python("-m", "scalebench", "run", str(results / "two.yml"), "--runtime", "podman",
              "--image", "localhost/scalebench:test", "--nproc", "2", "--outputs",
              str(results), "--output", "two", "--no-html", timeout=900, env=env)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    rows = rows_of_the_image(podman, digest, results / "two.parquet")[0]
    assert set(rows["prov_world_size"]) == {2}


@pytest.mark.slow
def test_compare_names_what_the_image_changes(image, tmp_path):
    """docs/comparing.md's podman block in a clone: the same config on the host and in the
    image, then `scalebench compare`: the image digest is among the differing fields, host
    names and dates are not, and every measure of both sides' three repetitions is judged.
    The comparison is printed (``pytest -s``) for docs/performance.md."""
    podman, digest = image
    assert PODMAN_BLOCK_TEST.endswith("::test_compare_names_what_the_image_changes")
    copy = clone(tmp_path)
    env = {**podman.environment(), **shell(copy), "SB_ENGINE": " ".join(podman.command)}
    done = run_block("podman", copy, env, {"localhost/scalebench:latest":
                                           "localhost/scalebench:test"})
    print(f"\n{done[-1].stdout}")
    rows_of_the_image(podman, digest, copy / OUTPUTS / "image.parquet")
    found = json.loads(subprocess.run(
        ["bash", "-c", "scalebench compare benchmark_inference/outputs/host.parquet "
         "benchmark_inference/outputs/image.parquet --format json"], cwd=copy, env=env,
        capture_output=True, text=True, timeout=300, check=False).stdout)
    assert found["differences"]["image_digest"] == ["none", digest]
    assert not {"hostname", "rank_hosts", "job_id", "timestamp"} & set(found["differences"])
    experiment, = found["experiments"]
    assert experiment["repetitions"] == [3, 3]
    assert {m["verdict"] for m in experiment["measures"]} <= {
        "faster", "slower", "same", "smaller", "larger", "better", "worse"}


@pytest.mark.slow
def test_image_describes_itself_and_passes_its_self_test(image, tmp_path):
    podman, digest = image
    info = in_image(podman, digest, tmp_path)
    assert info.returncode == 0, info.stderr
    assert "scalebench image" in info.stdout and digest in info.stdout
    assert f"torch {LOCK['torch']}" in info.stdout and "dncnn_sigma2_gray.pth" in info.stdout
    selftest = in_image(podman, digest, tmp_path, "scalebench-image-test")
    assert selftest.returncode == 0, selftest.stdout[-2000:] + selftest.stderr[-2000:]
    assert "image test passed" in selftest.stdout
    for benchmark in ("benchmark_inference", "benchmark_training"):
        assert f"ok: tiny CPU run of {benchmark}" in selftest.stdout
    assert "skipped: no GPU visible" in selftest.stdout


@pytest.mark.slow
def test_image_keeps_nothing_of_the_build_time_mounts(image, tmp_path):
    """pip settings and the host CA bundle were mounted for the build only."""
    podman, digest = image
    bundle = "/etc/ssl/certs/ca-certificates.crt"
    listing = in_image(podman, digest, tmp_path, "sh", "-c",
                       f"ls -A /run/scalebench-build; ls /etc/pip.conf 2>&1; sha256sum {bundle}")
    lines = listing.stdout.splitlines()
    assert lines[0].startswith("ls: cannot access '/etc/pip.conf'"), lines
    base = podman("run", "--rm", "--entrypoint", "sha256sum", BASE_TAG, bundle)
    assert base.returncode == 0, base.stderr
    assert lines[1] == base.stdout.strip()  # the base's own bundle, unchanged


@pytest.mark.slow
def test_image_interpreter_is_a_final_release_of_the_pinned_python(image, tmp_path):
    """The interpreter and distribution release are those base-image.toml names."""
    podman, digest = image
    probe = ("import json, platform, sys; print(json.dumps([sys.version_info[:2], "
             "sys.version_info.releaselevel, platform.freedesktop_os_release()]))")
    result = in_image(podman, digest, tmp_path, "python", "-c", probe)
    assert result.returncode == 0, result.stderr
    version, level, release = json.loads(result.stdout)
    assert ".".join(map(str, version)) == IMAGE_PYTHON["version"]
    assert level == "final"  # not an alpha, beta or release candidate
    assert release["ID"] == DISTRIBUTION["name"]
    assert release["VERSION_ID"] == DISTRIBUTION["version"]
    tag = BASE_IMAGE["base"]["tag"]
    assert tag.endswith(f"{DISTRIBUTION['name']}{DISTRIBUTION['version']}")


# Project tests that need neither git nor a container engine, run on the image's interpreter.
PORTABLE_TESTS = ("tests/unit/test_config.py", "tests/unit/test_metrics.py",
                  "tests/unit/test_operators.py", "tests/unit/test_adjointness.py")


@pytest.mark.slow
def test_project_tests_pass_on_the_image_interpreter(image, tmp_path):
    """The pinned stack on another Python than the host's: pytest comes from wheels made for
    the image's interpreter, installed in the throwaway container, never in the image."""
    podman, digest = image
    wheels = pinned_wheels(tmp_path / "wheels", ("pytest",), IMAGE_PYTHON["version"])
    script = ("pip install --quiet --no-index --find-links /wheels --target /tmp/pytest "
              "-c constraints.txt pytest && PYTHONPATH=/tmp/pytest python -m pytest -q "
              f"-p no:cacheprovider {' '.join(PORTABLE_TESTS)}")
    result = podman("run", "--rm", "-v", f"{REPO}:/repo:ro", "-v", f"{wheels}:/wheels:ro",
                    "-w", "/repo", "-e", "PYTHONDONTWRITEBYTECODE=1", digest, "sh", "-c",
                    script)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert re.search(r"\b\d+ passed\b", result.stdout) and "failed" not in result.stdout


@pytest.mark.slow
def test_verify_image_by_id(image):
    podman, digest = image
    engine = " ".join(podman.command)
    env = podman.environment()
    ok = run_python("-m", "scalebench", "verify-image", "localhost/scalebench:test", "--digest",
             digest, "--engine", engine, env=env)
    assert ok.returncode == 0 and "verified" in ok.stdout, ok.stderr
    other = run_python("-m", "scalebench", "verify-image", "localhost/scalebench:test", "--digest",
                "sha256:" + "2" * 64, "--engine", engine, env=env)
    assert other.returncode == 1 and "another image" in other.stderr
    missing = run_python("-m", "scalebench", "verify-image", "localhost/absent:1", "--digest",
                  digest, "--engine", engine, env=env)
    assert missing.returncode == 2 and "cannot inspect image" in missing.stderr
