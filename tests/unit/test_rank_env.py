"""The rank environment (scalebench.launch.rank_env): one mapping of SLURM's task variables,
one port rule for the launcher, the ranks and the batch templates."""

from __future__ import annotations

import itertools
import socket

import pytest

from scalebench.launch import processes, rank_env
from scalebench.launch.launch_variables import launch_from_environment
from scalebench.launch.rank_env import (
    EXPERIMENT_PORT_SPAN,
    PREFLIGHT_PORT_OFFSET,
    export_rank_environment,
    master_port,
    slurm_ranks,
)
from scalebench.launch.runtimes import Host

TASK = {"SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1",
        "SLURM_NTASKS_PER_NODE": "4(x2)", "SLURM_JOB_ID": "4242",
        "SLURM_JOB_NODELIST": "n[1-2]"}


def test_slurm_task_variables_give_the_torch_rank_variables():
    assert slurm_ranks(TASK) == {"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1",
                                 "LOCAL_WORLD_SIZE": "4"}
    assert slurm_ranks({**TASK, "SLURM_NTASKS_PER_NODE": "",
                        "SLURM_TASKS_PER_NODE": "2,1"})["LOCAL_WORLD_SIZE"] == "2"


def test_a_task_slurm_started_itself_gets_its_rank_and_rendezvous(monkeypatch):
    # The first node's address is scontrol's answer (a process): given here.
    monkeypatch.setattr(rank_env, "first_node_address", lambda nodelist=None: "10.0.0.7")
    env = dict(TASK)
    export_rank_environment(env)
    assert (env["RANK"], env["WORLD_SIZE"], env["MASTER_PORT"], env["MASTER_ADDR"]) == \
        ("5", "8", str(master_port("4242")), "10.0.0.7")
    launched = {**TASK, "RANK": "0", "MASTER_PORT": "1234"}
    export_rank_environment(launched)  # the launcher's variables win
    assert (launched["RANK"], launched["MASTER_PORT"]) == ("0", "1234")
    alone = {"SLURM_PROCID": "0", "SLURM_NTASKS": "1"}
    export_rank_environment(alone)
    assert "RANK" not in alone


def test_ports_of_one_job_and_of_jobs_with_nearby_ids_never_meet():
    def ports(job: int) -> set[int]:
        offsets = [*range(EXPERIMENT_PORT_SPAN), PREFLIGHT_PORT_OFFSET]
        return {master_port(job, offset) for offset in offsets}

    assert len(ports(100)) == EXPERIMENT_PORT_SPAN + 1
    for job in range(100, 130):
        assert not ports(job) & ports(job + 1), job
        assert all(20000 <= port < 65536 for port in ports(job))


def test_containers_get_the_rank_variables_and_nccl_settings():
    env = {**TASK, "SB_REPO": "/repo", "SB_TASK_RANKS": "1", "NCCL_SOCKET_IFNAME": "ib0",
           "NCCL_IB_HCA": "mlx5", "UNRELATED": "x"}
    handed = launch_from_environment(env, ["-V"], Host()).env
    assert handed["RANK"] == "5" and handed["LOCAL_WORLD_SIZE"] == "4"
    assert handed["NCCL_SOCKET_IFNAME"] == "ib0" and handed["NCCL_IB_HCA"] == "mlx5"
    assert "UNRELATED" not in handed


def test_a_local_rendezvous_port_is_free_and_outside_the_ephemeral_range(tmp_path,
                                                                       monkeypatch):
    if not processes.EPHEMERAL_RANGE.is_file():
        pytest.skip(f"no {processes.EPHEMERAL_RANGE} here (Linux's ephemeral port range)")
    start, end = map(int, processes.EPHEMERAL_RANGE.read_text().split())
    free = list(itertools.islice((port for port in reversed(processes.rendezvous_ports())
                                  if processes.port_is_free(port)), 2))
    held = socket.socket()  # a port in use, on one address only, is never handed out
    held.bind(("127.0.0.1", free[0]))
    try:
        assert not processes.port_is_free(free[0])
        with monkeypatch.context() as patch:  # the held port drawn first, then a free one
            patch.setattr(processes.random.Random, "sample", lambda self, ports, k: free)
            port = processes.free_port()
    finally:
        held.close()
    assert port == free[1] and not start <= port <= end
    with socket.socket() as probe:
        probe.bind(("", port))
    # A range that leaves more room above it: ports above; none known: any free port.
    ranges = tmp_path / "ip_local_port_range"
    monkeypatch.setattr(processes, "EPHEMERAL_RANGE", ranges)
    ranges.write_text("2000\t20000\n")
    assert processes.rendezvous_ports() == range(20001, 65536)
    ranges.unlink()
    assert processes.rendezvous_ports() == range(0)
    assert 0 < processes.free_port() < 65536


def test_a_step_port_taken_by_an_earlier_start_of_the_job_moves_to_the_next_offset():
    """A requeued job keeps its id: its steps' ports are those of its previous start, where a
    rank left behind may still listen; the step then takes the next offset's free port."""
    assert processes.step_port("4242", 3, lambda port: True) == master_port("4242", 3)
    taken = {master_port("4242", 3), master_port("4242", 4)}
    assert processes.step_port("4242", 3, lambda port: port not in taken) == \
        master_port("4242", 5)
    last = rank_env.EXPERIMENT_PORT_SPAN - 1
    assert processes.step_port("4242", last, lambda port: port != master_port("4242", last)) \
        == master_port("4242", 0)  # the offsets wrap
    # a port held on this machine, on one address, counts as taken
    held = socket.socket()
    try:
        held.bind(("127.0.0.1", master_port("4243", 0)))
    except OSError:
        pytest.skip(f"port {master_port('4243', 0)} is in use here by another program")
    try:
        assert processes.step_port("4243", 0) != master_port("4243", 0)
    finally:
        held.close()
