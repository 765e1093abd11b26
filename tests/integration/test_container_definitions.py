"""The container definitions: generated from the pins, labelled with the lock, built the same
way by both engines, hadolint-clean, weights verified against the manifest, the base pinned."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from dockerfile_parse import DockerfileParser
from packaging.specifiers import SpecifierSet
from spython.main.parse.parsers import SingularityParser

from tests.support.container_tools import BASE_IMAGE, IMAGE_PYTHON, LOCK, run_python
from tests.support.paths import REPO

DOCKERFILE = REPO / "containers/Dockerfile"


DEFINITION = REPO / "containers/scalebench.def"


SECTIONS = ("arguments", "files", "labels", "environment", "post", "runscript", "test", "help")


def apptainer_recipe():
    return SingularityParser(str(DEFINITION)).recipe["spython-base"]


def apptainer_labels() -> dict[str, str]:
    return dict(line.split(" ", 1) for line in apptainer_recipe().labels)


def test_definitions_are_generated_from_the_pins():
    result = run_python("containers/generate.py", "--check")
    assert result.returncode == 0, result.stderr


def test_a_changed_pin_makes_both_definitions_out_of_date(tmp_path):
    for name in ("pyproject.toml", "constraints.txt", "containers/base-image.toml",
                 "containers/Dockerfile", "containers/scalebench.def",
                 "scalebench/data/manifest.toml", "containers/weights/manifest.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tmp_path / name)
    lock = tmp_path / "constraints.txt"
    lock.write_text(lock.read_text().replace("deepinv==0.5.0", "deepinv==0.5.1"))
    result = run_python("containers/generate.py", "--check", "--root", str(tmp_path))
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
    base = BASE_IMAGE["base"]
    if base["digest"]:  # both definitions pin the recorded digest
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", base["digest"])
        assert f"ARG BASE_DIGEST={base['digest']}" in DOCKERFILE.read_text()
        assert base["digest"] in (REPO / "containers/scalebench.def").read_text()
        return
    result = run_python("containers/build.py", "build", "--engine", "podman")
    assert result.returncode == 2
    assert "containers/base-image.toml records no digest" in result.stderr
    assert "unrecorded-see-containers-base-image.toml" in DOCKERFILE.read_text()


def test_verify_image_refuses_a_file_that_is_not_a_sif(tmp_path):
    """Real SIF files are verified in tests/system/test_apptainer.py; anything else is bad input."""
    fake = tmp_path / "scalebench.sif"
    fake.write_bytes(b"a stand-in for an image file")
    for args in ([str(fake)], [str(tmp_path / "absent.sif")]):
        result = subprocess.run([sys.executable, "-m", "scalebench", "verify-image", *args,
                                 "--digest", "sha256:" + "0" * 64], capture_output=True,
                                text=True, check=False)
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith("scalebench: error: ")
        assert len(result.stderr.strip().splitlines()) == 1
    assert "is not a SIF file" in run_python("-m", "scalebench", "verify-image", str(fake),
                                      "--digest", "sha256:" + "0" * 64).stderr
