"""Container command lines (scalebench.launch.containers): the exact argv of every runtime
with and without GPUs, binds, identities and rank variables."""

from __future__ import annotations

import pytest

from scalebench.errors import ScalebenchError
from scalebench.launch.images import ImageIdentity
from scalebench.launch.launch_variables import launch_from_environment
from scalebench.launch.runtimes import (
    Apptainer,
    Docker,
    Host,
    Launch,
    Podman,
    apptainer_env_item,
    engine_runtime,
    get_runtime,
)
from tests.support.container_lines import APPTAINER_ENV, SLURM_TASK

IDENTITY = ImageIdentity("sha256:" + "a" * 64, {"org.scalebench.torch": "2.14.1"})


LABELS_JSON = '{"org.scalebench.torch":"2.14.1"}'


RANKS = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.1",
         "MASTER_PORT": "20042", "CUDA_VISIBLE_DEVICES": "1,3"}


LAUNCH = {"command": ["python", "-m", "scalebench.rank.preflight"], "workdir": "/repo",
          "env": RANKS, "binds": ["/repo:/repo", "/data:/in:ro"], "devices": ["1", "3"]}


RANK_FLAGS = ["RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=1", "MASTER_ADDR=10.0.0.1",
              "MASTER_PORT=20042"]


def flags(option: str, values: list[str]) -> list[str]:
    return [word for value in values for word in (option, value)]


ENGINE_HEAD = ["run", "--rm", "--network", "host", "--ipc", "host", "--workdir", "/repo"]


ENGINE_TAIL = [*flags("--env", RANK_FLAGS),
               "--env", f"SCALEBENCH_IMAGE_DIGEST={IDENTITY.digest}",
               "--env", f"SCALEBENCH_IMAGE_LABELS_JSON={LABELS_JSON}",
               *flags("--volume", ["/repo:/repo", "/data:/in:ro"]), IDENTITY.digest,
               "python", "-m", "scalebench.rank.preflight"]


APPTAINER_TAIL = [*flags("--env", [*RANK_FLAGS, "CUDA_VISIBLE_DEVICES=1,3"]),
                  *flags("--bind", ["/repo:/repo", "/data:/in:ro"]), "/img/sb.sif", "python",
                  "-m", "scalebench.rank.preflight"]


GOLDEN = {
    ("none", False): ["python", "-m", "scalebench.rank.preflight"],
    ("none", True): ["python", "-m", "scalebench.rank.preflight"],
    ("apptainer", False): ["apptainer", "exec", "--cleanenv", "--pwd", "/repo",
                           *APPTAINER_TAIL],
    ("apptainer", True): ["apptainer", "exec", "--cleanenv", "--pwd", "/repo", "--nv",
                          *APPTAINER_TAIL],
    ("docker", False): ["docker", *ENGINE_HEAD, *ENGINE_TAIL],
    ("docker", True): ["docker", *ENGINE_HEAD, "--gpus", '"device=1,3"', *ENGINE_TAIL],
    ("podman", False): ["podman", *ENGINE_HEAD, *ENGINE_TAIL],
    ("podman", True): ["podman", *ENGINE_HEAD, "--device", "nvidia.com/gpu=1", "--device",
                       "nvidia.com/gpu=3", *ENGINE_TAIL],
}


@pytest.mark.parametrize(("runtime", "gpus"), list(GOLDEN))
def test_command_line_of_each_runtime(runtime, gpus):
    platform = get_runtime(runtime)
    image, env = "/img/sb.sif", dict(RANKS)
    if isinstance(platform, Docker):
        image = IDENTITY.digest
        env.update(IDENTITY.variables())
    launch = Launch(**{**LAUNCH, "env": env}, image=image, gpus=gpus)
    assert platform.command_line(launch) == GOLDEN[(runtime, gpus)]


@pytest.mark.parametrize("value", list(APPTAINER_ENV))
def test_apptainer_env_items(value):
    assert apptainer_env_item("Q", value) == APPTAINER_ENV[value]


def test_a_value_apptainer_cannot_take_is_a_clear_error():
    with pytest.raises(ScalebenchError, match='cannot pass Q: its value ends with a double'):
        apptainer_env_item("Q", 'x"')


def test_all_gpus_when_none_are_named():
    launch = Launch(["nvidia-smi"], "img", gpus=True)
    assert Docker().command_line(launch) == ["docker", "run", "--rm", "--network", "host",
                                             "--ipc", "host", "--gpus", "all", "img",
                                             "nvidia-smi"]
    assert Podman().command_line(launch) == ["podman", "run", "--rm", "--network", "host",
                                             "--ipc", "host", "--device", "nvidia.com/gpu=all",
                                             "img", "nvidia-smi"]


def test_engine_with_global_options():
    runtime = engine_runtime("/usr/bin/podman --root /s --runroot /r")
    assert isinstance(runtime, Podman)
    assert runtime.command_line(Launch(["true"], "img")) == [
        "/usr/bin/podman", "--root", "/s", "--runroot", "/r", "run", "--rm", "--network",
        "host", "--ipc", "host", "img", "true"]
    assert isinstance(engine_runtime(["docker", "-H", "unix:///x.sock"]), Docker)
    assert not isinstance(engine_runtime("docker"), Podman)


TASK_ENV = ["RANK=3", "WORLD_SIZE=4", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2",
            "MASTER_ADDR=10.0.0.1", "MASTER_PORT=20042", "SLURM_JOB_ID=42",
            "SLURM_JOB_NODELIST=n[1,3]", "SLURM_NTASKS=4", "SLURM_NTASKS_PER_NODE=2",
            "SLURMD_NODENAME=n2"]


def test_srun_task_under_apptainer_gets_its_rank_explicitly():
    """--cleanenv drops SLURM_*: the rank, world and master come in as --env."""
    launch = launch_from_environment({**SLURM_TASK, "SB_IMAGE": "/i.sif"}, ["-V"],
                                     Apptainer())
    assert Apptainer().command_line(launch) == [
        "apptainer", "exec", "--cleanenv", "--pwd", "/repo", *flags("--env", TASK_ENV),
        "--bind", "/repo:/repo", "/i.sif", "python", "-V"]


def test_binds_of_data_weights_outputs_and_config():
    env = {"SB_REPO": "/repo", "SB_IMAGE": "/i.sif", "SB_DATA": "/data", "SB_WEIGHTS": "/w",
           "SB_OUTPUTS": "/results", "SB_BENCHMARK": "/repo/benchmark_inference",
           "SB_CONFIG": "/results/cfg/a.yml", "SCALEBENCH_CACHE": "/data/cache",
           "SB_BINDS": "/scratch,/ro:/ro:ro"}
    launch = launch_from_environment(env, ["-V"], Apptainer())
    assert launch.binds == ["/repo:/repo", "/results:/results", "/data:/data", "/w:/w",
                            "/scratch:/scratch", "/ro:/ro:ro"]
    assert launch.env == {"TORCH_HOME": "/w", "SCALEBENCH_CACHE": "/data/cache"}


def test_host_runtime_runs_the_venv_with_the_ranks_in_its_environment():
    launch = launch_from_environment({**SLURM_TASK, "SB_WEIGHTS": "/w"}, ["-V"], Host())
    assert Host().command_line(launch) == ["/repo/.venv/bin/python", "-V"]
    assert launch.env["RANK"] == "3" and launch.env["TORCH_HOME"] == "/w"


def test_docker_and_podman_get_the_identity_and_start_the_image_by_id():
    env = {"SB_REPO": "/repo", "SB_IMAGE": "sb:1", "SB_IMAGE_DIGEST": IDENTITY.digest,
           "SB_IMAGE_LABELS_JSON": LABELS_JSON, "SB_GPUS": "1", "CUDA_VISIBLE_DEVICES": "2"}
    launch = launch_from_environment(env, ["-V"], Podman())
    assert Podman().command_line(launch) == [
        "podman", *ENGINE_HEAD, "--device", "nvidia.com/gpu=2",
        "--env", f"SCALEBENCH_IMAGE_DIGEST={IDENTITY.digest}",
        "--env", f"SCALEBENCH_IMAGE_LABELS_JSON={LABELS_JSON}", "--volume", "/repo:/repo",
        IDENTITY.digest, "python", "-V"]
