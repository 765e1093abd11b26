"""The SLURM templates' exact command lines per runtime and GPU setting, printed by a dry run of
the templates (no SLURM, no image); real jobs are in tests/system/test_slurm_templates.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.paths import REPO

TEMPLATES = REPO / "slurm_templates"


TASK = TEMPLATES / "task-python.sh"


SLURM_TASK = {"SB_TASK_RANKS": "1", "SLURM_PROCID": "3", "SLURM_NTASKS": "4",
              "SLURM_LOCALID": "1", "SLURM_NTASKS_PER_NODE": "2", "SLURM_JOB_ID": "42",
              "SLURMD_NODENAME": "n2", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "20042"}


RANK_ENV = ("RANK=3 WORLD_SIZE=4 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=10.0.0.1 "
            "MASTER_PORT=20042 SLURM_JOB_ID=42 SLURM_NTASKS=4 SLURM_NTASKS_PER_NODE=2 "
            "SLURMD_NODENAME=n2").split()


def dry_run(command: list[str], **env: str) -> str:
    base = {"PATH": "/usr/bin:/bin", "SB_DRY_RUN": "1", "SB_REPO": "/repo",
            "PYTHONPATH": str(REPO)}
    done = subprocess.run(command, env={**base, **env}, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def flags(option: str, values: list[str]) -> str:
    return " ".join(f"{option} {value}" for value in values)


LABELS = '{"org.scalebench.torch":"2.14.1"}'


IDENTITY = f"--env SCALEBENCH_IMAGE_DIGEST=sha256:abc --env 'SCALEBENCH_IMAGE_LABELS_JSON={LABELS}'"


ENGINE = "run --rm --network host --ipc host --workdir /repo"


APPTAINER = "apptainer exec --cleanenv --pwd /repo"


GOLDEN_TASK = {
    ("none", "0"): "/repo/.venv/bin/python -m scalebench.rank.preflight",
    ("none", "1"): "/repo/.venv/bin/python -m scalebench.rank.preflight",
    ("apptainer", "0"): f"{APPTAINER} {flags('--env', RANK_ENV)} --env "
                        "SCALEBENCH_IMAGE_DIGEST=sha256:abc --bind /repo:/repo /img/sb.sif "
                        "python -m scalebench.rank.preflight",
    ("apptainer", "1"): f"{APPTAINER} --nv {flags('--env', RANK_ENV)} --env "
                        "CUDA_VISIBLE_DEVICES=1 --env SCALEBENCH_IMAGE_DIGEST=sha256:abc "
                        "--bind /repo:/repo /img/sb.sif python -m scalebench.rank.preflight",
    ("docker", "0"): f"docker {ENGINE} {flags('--env', RANK_ENV)} {IDENTITY} "
                     "--volume /repo:/repo sha256:abc python -m scalebench.rank.preflight",
    ("docker", "1"): f"docker {ENGINE} --gpus '\"device=1\"' {flags('--env', RANK_ENV)} "
                     f"{IDENTITY} --volume /repo:/repo sha256:abc python -m "
                     "scalebench.rank.preflight",
    ("podman", "0"): f"podman {ENGINE} {flags('--env', RANK_ENV)} {IDENTITY} "
                     "--volume /repo:/repo sha256:abc python -m scalebench.rank.preflight",
    ("podman", "1"): f"podman {ENGINE} --device nvidia.com/gpu=1 {flags('--env', RANK_ENV)} "
                     f"{IDENTITY} --volume /repo:/repo sha256:abc python -m "
                     "scalebench.rank.preflight",
}


@pytest.mark.parametrize(("runtime", "gpus"), list(GOLDEN_TASK))
def test_task_command_line_for_each_runtime(runtime, gpus):
    """task-python.sh prints what scalebench.launch.containers builds; the rows of docker / podman
    ranks get the image's digest and labels, and the image starts by its ID."""
    image = "/img/sb.sif" if runtime == "apptainer" else "sb:1"
    env = {**SLURM_TASK, "SB_RUNTIME": runtime, "SB_GPUS": gpus, "SB_IMAGE": image,
           "SB_IMAGE_DIGEST": "sha256:abc", "SB_IMAGE_LABELS_JSON": LABELS}
    if gpus == "1":
        env["CUDA_VISIBLE_DEVICES"] = "1"
    line = dry_run([str(TASK), "-m", "scalebench.rank.preflight"], **env).strip()
    assert line == GOLDEN_TASK[(runtime, gpus)]


def test_task_binds_data_and_weights_and_sets_torch_home():
    line = dry_run([str(TASK), "-V"], SB_RUNTIME="apptainer", SB_IMAGE="/i.sif",
                   SB_DATA="/data", SB_WEIGHTS="/w", SB_BINDS="/scratch:/scratch",
                   SB_OUTPUTS="/results").strip()
    assert line == ("apptainer exec --cleanenv --pwd /repo --env TORCH_HOME=/w --bind "
                    "/repo:/repo --bind /results:/results --bind /data:/data --bind /w:/w "
                    "--bind /scratch:/scratch /i.sif python -V")


def test_unknown_runtime_is_a_one_line_error():
    done = subprocess.run([str(TASK), "-V"], env={"SB_REPO": str(REPO), "SB_RUNTIME": "lxc",
                                                  "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stderr == ("scalebench: error: SB_RUNTIME must be none, apptainer, docker or "
                           "podman, got 'lxc'\n")


def test_batch_template_commands():
    env = {"SB_CONFIG": "configs/default.yml", "SLURM_JOB_ID": "42", "SLURM_NTASKS": "4",
           "SLURM_JOB_NODELIST": "n[1-2]", "MASTER_ADDR": "10.0.0.1", "SB_GPUS": "1",
           "SB_RUNTIME": "apptainer", "SB_IMAGE": "/img/sb.sif", "SB_RESUME": "1",
           "SB_REPO": str(REPO), "SB_OUTPUTS": "/scratch/results"}
    lines = dry_run(["bash", str(TEMPLATES / "multinode.sh")], **env).splitlines()
    assert lines == [
        "[scalebench] job 42: 4 task(s) on n[1-2] (master 10.0.0.1), runtime apptainer, "
        f"config {REPO}/configs/default.yml",
        "srun --kill-on-bad-exit=1 --export=ALL --gpus-per-task=1 "
        f"{REPO}/slurm_templates/task-python.sh -m scalebench.rank.preflight --output "
        "/scratch/results/default_42.preflight.json ",
        f"python3 -m scalebench run {REPO}/configs/default.yml --benchmark "
        f"{REPO}/benchmark_inference --outputs /scratch/results --launcher srun --output "
        f"default_42 --python {REPO}/slurm_templates/task-python.sh "
        "--srun-args=--gpus-per-task=1 --resume ",
    ]


def test_tune_template_runs_a_worker_per_task_then_writes_the_outputs():
    """tune.sh: one srun step whose every task is a worker of the same tuning, its index the
    task's (expanded inside the step), in the runtime; then the outputs, running no trial."""
    env = {"SB_CONFIG": "configs/default.yml", "SLURM_JOB_ID": "42", "SLURM_NTASKS": "4",
           "SLURM_JOB_NODELIST": "n[1-2]", "SB_GPUS": "1", "SB_RUNTIME": "apptainer",
           "SB_IMAGE": "/img/sb.sif", "SB_REPO": str(REPO), "SB_OUTPUTS": "/scratch/results",
           "SB_TRIALS": "40", "SB_BUDGET": "2h"}
    lines = dry_run(["bash", str(TEMPLATES / "tune.sh")], **env).splitlines()
    tune = (f"{REPO}/slurm_templates/task-python.sh -m scalebench tune "
            f"{REPO}/configs/default.yml --outputs /scratch/results --output default_tune "
            "--trials 40 --budget 2h")
    assert lines == [
        f"[scalebench] job 42: tuning {REPO}/configs/default.yml with 4 worker(s) on n[1-2], "
        "runtime apptainer, into /scratch/results/default_tune",
        "srun --export=ALL --gpus-per-task=1 bash -c "
        + r'exec\ \"\$@\"\ --worker\ \"\$SLURM_PROCID\"' + f" worker {tune} ",
        f"{tune} --workers 0 ",
    ]
    step = subprocess.run(["bash", "-c", 'exec "$@" --worker "$SLURM_PROCID"', "worker",
                           "echo", "tune"], env={"SLURM_PROCID": "3", "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, check=True)
    assert step.stdout == "tune --worker 3\n"  # what each task of the step runs


def test_srun_step_of_one_experiment():
    from scalebench.launch.processes import srun_command

    command = srun_command(["/repo/slurm_templates/task-python.sh"], Path("/o/e1"),
                           Path("/repo/benchmark_inference"), Path("/o/e1.yml"),
                           ["--gpus-per-task=1"], "2/3")
    assert " ".join(command) == (
        "srun --kill-on-bad-exit=1 --export=ALL --gpus-per-task=1 "
        "/repo/slurm_templates/task-python.sh -m scalebench.launch.rank_entry --folder /o/e1 "
        "--benchmark /repo/benchmark_inference --config /o/e1.yml --position 2/3 --from-slurm")
