"""The container bundle: definitions generated from the pins, a real image built and run.

Fast tests check the Dockerfile and the Apptainer definition against pyproject.toml,
constraints.txt and containers/base-image.toml (and against each other), run hadolint and the
weights verification. Slow tests build the Dockerfile with podman from a stand-in base of the
production base's distribution release (no registry is reachable), run the benchmark inside
it through the launch helper, replay the rows in the same image and run some of the project's
tests on the image's interpreter; Apptainer builds run where apptainer is installed.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pandas as pd
import pytest
import yaml
from dockerfile_parse import DockerfileParser
from packaging.specifiers import SpecifierSet
from spython.main.parse.parsers import SingularityParser

from containers.generate import read_lock
from tests.conftest import REPO, tiny_experiment
from tests.container_tools import (
    BASE_TAG,
    DISTRIBUTION,
    Podman,
    local_pip_options,
    pinned_wheels,
    seeded_weights,
)

DOCKERFILE = REPO / "containers/Dockerfile"
DEFINITION = REPO / "containers/scalebench.def"
SECTIONS = ("arguments", "files", "labels", "environment", "post", "runscript", "test", "help")
LOCK = read_lock((REPO / "constraints.txt").read_text())
IMAGE_PYTHON = tomllib.loads((REPO / "containers/base-image.toml").read_text())["python"]


def run(*args: str, timeout: int = 120, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, check=False, **kwargs)


def apptainer_recipe():
    return SingularityParser(str(DEFINITION)).recipe["spython-base"]


def apptainer_labels() -> dict[str, str]:
    return dict(line.split(" ", 1) for line in apptainer_recipe().labels)


def test_definitions_are_generated_from_the_pins():
    result = run("containers/generate.py", "--check")
    assert result.returncode == 0, result.stderr


def test_a_changed_pin_makes_both_definitions_out_of_date(tmp_path):
    for name in ("pyproject.toml", "constraints.txt", "containers/base-image.toml",
                 "containers/Dockerfile", "containers/scalebench.def",
                 "scalebench/data/manifest.toml", "containers/weights/manifest.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tmp_path / name)
    lock = tmp_path / "constraints.txt"
    lock.write_text(lock.read_text().replace("deepinv==0.5.0", "deepinv==0.5.1"))
    result = run("containers/generate.py", "--check", "--root", str(tmp_path))
    assert result.returncode == 1
    assert "containers/Dockerfile disagrees" in result.stderr
    assert "containers/scalebench.def disagrees" in result.stderr


def test_labels_equal_the_lock_in_both_definitions():
    docker = DockerfileParser(str(DOCKERFILE)).labels
    for name in ("torch", "torchvision", "deepinv", "benchopt", "astra-toolbox", "numpy"):
        assert docker[f"org.scalebench.{name}"] == LOCK[name], name
    lock_hash = hashlib.sha256((REPO / "constraints.txt").read_bytes()).hexdigest()
    assert docker["org.scalebench.constraints-sha256"] == lock_hash
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert docker["org.opencontainers.image.version"] == project["version"]
    apptainer = apptainer_labels()
    # The SIF alone records its squashfs compression and fixes Apptainer's build-date label.
    sif_only = {"org.scalebench.squashfs-compression", "org.label-schema.build-date"}
    assert set(apptainer) == set(docker) | sif_only
    pinned = {k: v for k, v in docker.items() if "{" not in apptainer[k]}
    assert pinned == {k: v for k, v in apptainer.items() if "{" not in v and k not in sif_only}
    assert apptainer["org.label-schema.build-date"] == "{{ CREATED }}"
    for required in ("source", "revision", "version", "created", "base.name", "base.digest"):
        assert f"org.opencontainers.image.{required}" in docker


def test_both_definitions_build_the_same_way():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert f"{IMAGE_PYTHON['version']}.0" in SpecifierSet(project["requires-python"])
    parser = DockerfileParser(str(DOCKERFILE))
    text = DEFINITION.read_text()
    sections = re.findall(r"(?m)^%(\w+)", text)
    assert sections == list(SECTIONS)
    arguments = dict(re.findall(r"(?m)^    (\w+)=(.*)$", text.split("%files")[0]))
    for name, value in parser.args.items():
        if name != "PIP_CONFIG_FILE":
            assert arguments[name] == value, name
    assert "From: {{ BASE_NAME }}@{{ BASE_DIGEST }}" in text
    assert parser.baseimage == f"{arguments['BASE_NAME']}@{arguments['BASE_DIGEST']}"
    # The same commands, environment, runscript and self-test in both.
    post = " ".join(apptainer_recipe().install).replace("\\", " ")
    for instruction in parser.structure:
        if instruction["instruction"] == "RUN":
            command = instruction["value"].replace("\\", " ")
            assert " ".join(command.split()) in " ".join(post.split())
    environment = dict(line.split("=", 1) for line in apptainer_recipe().environ)
    assert {k: v.strip('"') for k, v in environment.items()} == {
        k: v for k, v in parser.envs.items()}
    assert "scalebench-entrypoint" in apptainer_recipe().cmd
    assert "exec /opt/scalebench/bin/scalebench-image-test" in text.split("%test")[1]
    assert '"/opt/scalebench/bin/scalebench-entrypoint"' in parser.content
    for key in ("SCALEBENCH_OFFLINE", "HF_HUB_OFFLINE", "TORCH_HOME"):
        assert key in parser.envs


def test_hadolint_passes_on_the_dockerfile():
    hadolint = Path(sys.executable).parent / "hadolint"
    result = subprocess.run([str(hadolint), str(DOCKERFILE)], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def verify_weights(source: Path, destination: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", str(REPO / "containers/verify-weights.sh"), str(source),
                           str(destination)], capture_output=True, text=True, check=False)


def test_weights_are_verified_against_the_manifest(tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    (source / "a.pth").write_bytes(b"weights")
    good = hashlib.sha256(b"weights").hexdigest()
    (source / "manifest.txt").write_text(f"# comment\n{good} a.pth https://example/a.pth\n")
    result = verify_weights(source, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out/a.pth").read_bytes() == b"weights"
    # Run-time checks accept the copy through the record written beside it.
    assert (tmp_path / "out/a.pth.accepted-sha256").read_text().strip() == good
    (source / "manifest.txt").write_text("unknown a.pth https://example/a.pth\n")
    assert "no matching a.pth.accepted-sha256" in verify_weights(source, tmp_path / "o1").stderr
    (source / "a.pth.accepted-sha256").write_text(good + "\n")  # `fetch --allow-unverified`
    assert verify_weights(source, tmp_path / "o1").returncode == 0
    (source / "manifest.txt").write_text(f"{'0' * 64} a.pth https://example/a.pth\n")
    assert "a.pth has sha256 " + good in verify_weights(source, tmp_path / "o2").stderr
    (source / "manifest.txt").write_text(f"{good} b.pth https://example/b.pth\n")
    result = verify_weights(source, tmp_path / "o3")
    assert result.returncode == 1
    assert "b.pth listed in" in result.stderr and "https://example/b.pth" in result.stderr


def test_production_weights_need_recorded_checksums(tmp_path):
    """The committed manifest lists deepinv's files (rendered from scalebench's manifest);
    without the files, or with unknown checksums and no acceptance record, the build stops."""
    manifest = (REPO / "containers/weights/manifest.txt").read_text()
    assert "GENERATED by containers/generate.py from scalebench/data/manifest.toml" in manifest
    result = verify_weights(REPO / "containers/weights", tmp_path / "out")
    if not (REPO / "containers/weights/drunet_deepinv_gray_finetune_26k.pth").is_file():
        assert result.returncode == 1
        assert "scalebench fetch --weights" in result.stderr
    elif "unknown " in manifest:
        assert result.returncode == 1
        assert "has no recorded sha256" in result.stderr
    else:  # every file there with a published sha256: the build's weights check passes
        assert result.returncode == 0, result.stderr


def test_production_build_uses_the_recorded_base_digest_or_stops():
    base = tomllib.loads((REPO / "containers/base-image.toml").read_text())["base"]
    if base["digest"]:  # both definitions pin the recorded digest
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", base["digest"])
        assert f"ARG BASE_DIGEST={base['digest']}" in DOCKERFILE.read_text()
        assert base["digest"] in (REPO / "containers/scalebench.def").read_text()
        return
    result = run("containers/build.py", "build", "--engine", "podman")
    assert result.returncode == 2
    assert "containers/base-image.toml records no digest" in result.stderr
    assert "unrecorded-see-containers-base-image.toml" in DOCKERFILE.read_text()


# --- real images -----------------------------------------------------------------------------


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
    return run("-m", "scalebench.launch.containers", "run", digest, "--engine",
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
              "patch_size": 16, "overlap": 8, "distribute_physics": True,
              "distribute_denoiser": True, "num_threads": 1}
    dataset = {"tomography_2d": {"image_size": 48, "num_angles": 12, "num_operators": 4,
                                 "noise_level": 0.05}}
    experiment = tiny_experiment(dataset=[dataset], solver=[{"pnp": solver}])
    (results / "two.yml").write_text(yaml.safe_dump(experiment, sort_keys=False))
    env = {**podman.environment(), "SB_ENGINE": " ".join(podman.command)}
    ran = run("-m", "scalebench", "run", str(results / "two.yml"), "--runtime", "podman",
              "--image", "localhost/scalebench:test", "--nproc", "2", "--outputs",
              str(results), "--output", "two", "--no-html", timeout=900, env=env)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    rows = rows_of_the_image(podman, digest, results / "two.parquet")[0]
    assert set(rows["prov_world_size"]) == {2}


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
    tag = tomllib.loads((REPO / "containers/base-image.toml").read_text())["base"]["tag"]
    assert tag.endswith(f"{DISTRIBUTION['name']}{DISTRIBUTION['version']}")


# Project tests that need neither git nor a container engine, run on the image's interpreter.
PORTABLE_TESTS = ("tests/test_config.py", "tests/test_metrics.py", "tests/test_operators.py")


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
    ok = run("-m", "scalebench", "verify-image", "localhost/scalebench:test", "--digest",
             digest, "--engine", engine, env=env)
    assert ok.returncode == 0 and "verified" in ok.stdout, ok.stderr
    other = run("-m", "scalebench", "verify-image", "localhost/scalebench:test", "--digest",
                "sha256:" + "2" * 64, "--engine", engine, env=env)
    assert other.returncode == 1 and "another image" in other.stderr
    missing = run("-m", "scalebench", "verify-image", "localhost/absent:1", "--digest",
                  digest, "--engine", engine, env=env)
    assert missing.returncode == 2 and "cannot inspect image" in missing.stderr


def test_verify_image_refuses_a_file_that_is_not_a_sif(tmp_path):
    """Real SIF files are verified in tests/test_apptainer.py; anything else is bad input."""
    fake = tmp_path / "scalebench.sif"
    fake.write_bytes(b"a stand-in for an image file")
    for args in ([str(fake)], [str(tmp_path / "absent.sif")]):
        result = subprocess.run([sys.executable, "-m", "scalebench", "verify-image", *args,
                                 "--digest", "sha256:" + "0" * 64], capture_output=True,
                                text=True, check=False)
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith("scalebench: error: ")
        assert len(result.stderr.strip().splitlines()) == 1
    assert "is not a SIF file" in run("-m", "scalebench", "verify-image", str(fake),
                                      "--digest", "sha256:" + "0" * 64).stderr
