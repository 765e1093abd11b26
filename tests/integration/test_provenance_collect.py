"""What provenance.collect() records (it runs git for the code state), the code state of a
dirty tree, the image digest, deterministic mode."""

import hashlib
import json
import os
import subprocess

import pytest
import torch

import provenance
from provenance.process import code_state
from provenance.schema import FIELDS
from scalebench.rank.determinism import DETERMINISTIC_ENV, apply_determinism
from tests.support.paths import REPO

RUN_FIELDS = {"rank_hosts", "profiler_mode", "deterministic_mode", "seeds", "data_sha256",
              "config_hash", "config_json", "result_sha256", "weights", "weights_sha256",
              "denoiser_architecture"}


@pytest.fixture
def fresh(monkeypatch):
    """collect() re-read with a controlled environment."""
    for name in ("APPTAINER_CONTAINER", "SINGULARITY_CONTAINER", "SCALEBENCH_IMAGE_DIGEST",
                 "SCALEBENCH_IMAGE_LABELS", "SCALEBENCH_BUILD_INFO"):
        monkeypatch.delenv(name, raising=False)
    yield lambda: provenance.collect(refresh=True)
    provenance.collect(refresh=True)


def test_collect_has_every_process_field_with_its_type(fresh):
    record = fresh()
    assert set(record) == set(FIELDS) - RUN_FIELDS
    for field, (kind, _) in FIELDS.items():
        if field in record:
            assert isinstance(record[field], kind), field
    assert record["complete"] is True and record["missing"] == ""
    assert record["schema_version"] == provenance.SCHEMA_VERSION


def test_machine_without_gpu_is_recorded_as_such(fresh):
    record = fresh()
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the no-GPU record cannot be observed here")
    assert (record["gpu_models"], record["gpu_count"], record["gpu_driver"]) == ("none", 0,
                                                                                 "none")


def test_only_allow_listed_environment_variables_are_recorded(fresh, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter2-secret")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    record = fresh()
    env = json.loads(record["env"])
    assert env["NCCL_DEBUG"] == "INFO" and env["OMP_NUM_THREADS"] == "2"
    assert "hunter2-secret" not in json.dumps(record)


def test_image_digest_bare_metal_apptainer_and_handed_in(fresh, monkeypatch, tmp_path):
    assert fresh()["image_digest"] == "none"
    from tests.unit.test_sif_digest import PARTITIONS, write_sif

    sif = write_sif(tmp_path / "scalebench.sif", PARTITIONS, b"\x07" * 16, 1_700_000_000)
    monkeypatch.setenv("APPTAINER_CONTAINER", str(sif))
    # The SIF's digest without its build stamps: that of a stamp-free copy's file sha256.
    bare = write_sif(tmp_path / "bare.sif", PARTITIONS, bytes(16), 0)
    assert fresh()["image_digest"] == "sha256:" + hashlib.sha256(bare.read_bytes()).hexdigest()
    monkeypatch.setenv("SCALEBENCH_IMAGE_DIGEST", "sha256:abc123")
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({"org.scalebench.cuda": "13.0"}))
    monkeypatch.setenv("SCALEBENCH_IMAGE_LABELS", str(labels))
    record = fresh()
    assert record["image_digest"] == "sha256:abc123"
    assert json.loads(record["image_labels"]) == {"org.scalebench.cuda": "13.0"}


def test_unreadable_field_makes_the_record_incomplete(fresh, monkeypatch, tmp_path):
    broken = tmp_path / "labels.json"
    broken.write_text("{not json")
    monkeypatch.setenv("SCALEBENCH_IMAGE_LABELS", str(broken))
    record = fresh()
    assert record["complete"] is False and record["missing"] == "image"
    assert record["image_digest"] == "unknown"


def test_code_state_baked_in_at_image_build_wins(fresh, monkeypatch, tmp_path):
    info = tmp_path / "build-info.json"
    info.write_text(json.dumps({"commit": "0123abcd", "dirty": True, "diff_sha256": "ff"}))
    monkeypatch.setenv("SCALEBENCH_BUILD_INFO", str(info))
    record = fresh()
    assert (record["code_commit"], record["code_dirty"], record["code_diff_sha256"]) == \
        ("0123abcd", True, "ff")


def _git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_dirty_tree_is_recorded_as_dirty_with_a_hash_of_the_diff(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / "solver.py").write_text("step = 1\n")
    _git(tmp_path, "add", "solver.py")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    clean = code_state(tmp_path)
    assert clean["code_dirty"] is False and clean["code_diff_sha256"] == ""
    assert len(clean["code_commit"]) == 40
    (tmp_path / "solver.py").write_text("step = 2\n")
    edited = code_state(tmp_path)
    (tmp_path / "solver.py").write_text("step = 3\n")
    edited_again = code_state(tmp_path)
    assert edited["code_dirty"] is True and edited["code_commit"] == clean["code_commit"]
    assert edited["code_diff_sha256"] not in ("", edited_again["code_diff_sha256"])
    (tmp_path / "solver.py").write_text("step = 1\n")
    (tmp_path / "notes.txt").write_text("untracked\n")
    assert code_state(tmp_path)["code_dirty"] is True


def test_job_logs_in_the_repository_leave_the_code_state_clean(tmp_path):
    """A job submitted from the repository writes its log there (the templates'
    scalebench-%j.out): the repository's .gitignore keeps it out of the code state, so rows
    and calibration keys made inside the job match those made outside it."""
    _git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text((REPO / ".gitignore").read_text())
    _git(tmp_path, "add", ".gitignore")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    for log in ("scalebench-42.out", "scalebench-tune-43.out", "slurm-44.out"):
        (tmp_path / log).write_text("[scalebench] experiment 1/2 ...\n")
    assert code_state(tmp_path)["code_dirty"] is False
    (tmp_path / "scalebench-notes.txt").write_text("not a job log\n")
    assert code_state(tmp_path)["code_dirty"] is True


def test_slurm_and_topology_fields(fresh, monkeypatch):
    for name, value in {"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "0",
                        "SLURM_ARRAY_TASK_ID": "3", "SLURM_RESTART_COUNT": "1",
                        "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NTASKS": "4",
                        "SLURM_NTASKS_PER_NODE": "2(x2)", "SLURM_PROCID": "3"}.items():
        monkeypatch.setenv(name, value)
    for name in ("WORLD_SIZE", "LOCAL_WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR",
                 "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    alone = fresh()
    assert (alone["slurm_job_id"], alone["slurm_array_task_id"], alone["slurm_nodelist"]) \
        == ("77", "3", "n[1-2]")
    assert (alone["world_size"], alone["ranks_per_node"], alone["rank"]) == (1, 1, 0)
    # A task SLURM started itself gets its rank from the one mapping before rows are stamped.
    from scalebench.launch.rank_env import export_rank_environment, master_port

    exported = dict(os.environ)
    export_rank_environment(exported)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_PORT"):
        monkeypatch.setenv(name, exported[name])
    record = fresh()
    assert (record["world_size"], record["ranks_per_node"], record["rank"]) == (4, 2, 3)
    assert os.environ["MASTER_PORT"] == str(master_port("77"))


def test_deterministic_mode_sets_and_records_its_switches(fresh, monkeypatch):
    for name in DETERMINISTIC_ENV:  # restored after the test
        monkeypatch.setenv(name, "unset")
        monkeypatch.delenv(name)
    try:
        apply_determinism(True, seed=5)
        first = torch.rand(3)
        record = fresh()
        assert record["deterministic_algorithms"] and record["cudnn_deterministic"]
        assert not record["cudnn_benchmark"] and not record["tf32_matmul"]
        env = json.loads(record["env"])
        assert env["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
        assert (env["NCCL_ALGO"], env["NCCL_NVLS_ENABLE"]) == ("Ring", "0")
        apply_determinism(True, seed=5)
        assert torch.equal(torch.rand(3), first)
        apply_determinism(False, seed=5)
        assert provenance.collect()["deterministic_algorithms"] is False
    finally:
        apply_determinism(False, seed=0)


def test_image_description_names_an_unreadable_sif_instead_of_failing(fresh, monkeypatch, capsys,
                                                                     tmp_path):
    """``apptainer run`` without a command inside a container that cannot see its SIF."""
    from containers import image_info

    monkeypatch.setenv("APPTAINER_CONTAINER", str(tmp_path / "elsewhere.sif"))
    image_info.main()
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("  digest: unavailable (") and "elsewhere.sif" in line
               for line in lines), lines


def test_a_run_inside_a_sif_hashes_it_once_for_every_process_it_starts(fresh, monkeypatch,
                                                                      tmp_path):
    from provenance.process import hand_down_image_digest
    from provenance.sif import sif_digest
    from tests.unit.test_sif_digest import PARTITIONS, write_sif

    sif = write_sif(tmp_path / "image.sif", PARTITIONS, b"\x01" * 16, 1700000000)
    monkeypatch.setenv("APPTAINER_CONTAINER", str(sif))
    # recorded as unset, so that the digest written below is removed after the test
    monkeypatch.setenv("SCALEBENCH_IMAGE_DIGEST", "")
    hand_down_image_digest()
    assert os.environ["SCALEBENCH_IMAGE_DIGEST"] == sif_digest(sif)
    assert fresh()["image_digest"] == sif_digest(sif)
    monkeypatch.setenv("SCALEBENCH_IMAGE_DIGEST", "sha256:handed-in-by-the-launcher")
    hand_down_image_digest()  # a digest handed in is kept
    assert os.environ["SCALEBENCH_IMAGE_DIGEST"] == "sha256:handed-in-by-the-launcher"
