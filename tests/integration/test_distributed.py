"""Experiments on several local processes (gloo): same reconstruction as one process,
communication measured, bad distributions refused before the run, failures contained."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from provenance.stop_reasons import COMPLETE, FAILED, Stop, record_stops
from scalebench.launch.processes import RankGroup
from tests.support.cli import copy_benchmark, rank_process, run_cli
from tests.support.paths import REPO

# 48x48 CT, 6 angle groups, PnP with the bundled DnCNN on 16-pixel tiles (9 tiles in 5
# batches of 2; ranks get whole batches, so each tile meets the same batch on 1, 2 or 3 ranks).
DATASET = {"tomography_2d": {"image_size": 48, "num_angles": 18, "num_operators": 6,
                             "noise_level": 0.05}}


PNP = {"max_iter": 3, "device": "cpu", "denoiser": "dncnn", "denoiser_sigma": 0.05,
       "tile_size": 16, "tile_overlap": 8, "tiles_per_batch": 2, "distribute_physics": True,
       "distribute_denoiser": True, "num_threads": 1}


def experiment(solvers: list[dict], dataset: dict = DATASET) -> dict:
    return {"objective": ["imaging_inverse_problem"], "dataset": [dataset], "solver": solvers,
            "max-runs": 100, "timeout": 300}


@pytest.fixture
def benchmark(tmp_path):
    return copy_benchmark(tmp_path)


def run(benchmark, config, name: str, *extra: str) -> subprocess.CompletedProcess:
    return run_cli("run", config, "--benchmark", benchmark, "--output", name, "--no-html",
                   *extra)


def rows(benchmark, name: str) -> pd.DataFrame:
    return pd.read_parquet(benchmark / "outputs" / f"{name}.parquet").sort_values(
        ["solver_name", "stop_val"]).reset_index(drop=True)


@pytest.fixture(scope="module")
def one_two_three(tmp_path_factory):
    """The same experiment on 1, 2 and 3 ranks."""
    folder = tmp_path_factory.mktemp("ranks")
    copy = copy_benchmark(folder)
    config = folder / "exp.yml"
    config.write_text(json.dumps(experiment([{"pnp": PNP}])))
    results = {}
    for nproc in (1, 2, 3):
        done = run(copy, config, f"n{nproc}", "--nproc", str(nproc))
        assert done.returncode == 0, done.stderr[-3000:]
        results[nproc] = rows(copy, f"n{nproc}")
    return results


@pytest.mark.parametrize("nproc", [2, 3])
def test_ranks_reproduce_the_one_process_reconstruction(one_two_three, nproc):
    single, multi = one_two_three[1], one_two_three[nproc]
    assert multi.stop_val.tolist() == single.stop_val.tolist() == [0, 1, 2, 3]
    assert (multi.objective_psnr_db - single.objective_psnr_db).abs().max() <= 1e-6
    # float64 reduction of the adjoint and disjoint tiles: bit for bit in practice
    assert multi.prov_result_sha256.tolist() == single.prov_result_sha256.tolist()
    assert set(multi.prov_data_sha256) == set(single.prov_data_sha256)


def test_rows_carry_world_size_hosts_and_per_rank_figures(one_two_three):
    df = one_two_three[3]
    assert set(df.prov_world_size) == {3} and set(df.prov_rank) == {0}
    assert json.loads(df.prov_rank_hosts.iloc[0]) == [os.uname().nodename] * 3
    measured = df[df.stop_val > 0]
    for step in ("grad", "denoise"):
        assert (measured[f"objective_{step}_comm_time_s_max"] > 0).all()
        assert (measured[f"objective_{step}_comm_bytes"] > 0).all()
        for figure in ("time_s", "comm_time_s", "peak_host_rss_mib"):
            high, mean = (measured[f"objective_{step}_{figure}_{k}"] for k in ("max", "mean"))
            assert (high >= mean).all() and (mean > 0).all()
    # gradient: one float64 all-reduce of the 48x48 image per iteration
    assert (measured.objective_grad_comm_bytes == 48 * 48 * 8).all()
    assert (measured.objective_comm_time_s == measured.objective_grad_comm_time_s
            + measured.objective_denoise_comm_time_s).all()
    # one process: the same columns, with no communication
    single = one_two_three[1][one_two_three[1].stop_val > 0]
    assert (single.objective_comm_time_s_max == 0).all()
    assert (single.objective_setup_time_s > 0).all()


@pytest.mark.parametrize("switch", ["distribute_physics", "distribute_denoiser"])
def test_either_switch_alone_matches_one_process(benchmark, write_config, switch):
    other = {"distribute_physics", "distribute_denoiser"} - {switch}
    solver = {**PNP, other.pop(): False, "max_iter": 2}
    config = write_config(experiment([{"pnp": solver}]))
    for nproc in (1, 2):
        done = run(benchmark, config, f"n{nproc}", "--nproc", str(nproc))
        assert done.returncode == 0, done.stderr[-3000:]
    one, two = rows(benchmark, "n1"), rows(benchmark, "n2")
    assert two.prov_result_sha256.tolist() == one.prov_result_sha256.tolist()


def test_cgls_on_two_ranks_reproduces_one_process(benchmark, write_config):
    """The cgls baseline splits its physics (no denoiser): CG's image-space reductions take
    the same steps on every rank as in one process."""
    solver = {"max_iter": 4, "device": "cpu", "distribute_physics": True, "num_threads": 1}
    config = write_config(experiment([{"cgls": solver}]))
    for nproc in (1, 2):
        done = run(benchmark, config, f"n{nproc}", "--nproc", str(nproc))
        assert done.returncode == 0, done.stderr[-3000:]
    one, two = rows(benchmark, "n1"), rows(benchmark, "n2")
    assert two.stop_val.tolist() == one.stop_val.tolist() == [0, 1, 2, 3, 4]
    assert two.prov_result_sha256.tolist() == one.prov_result_sha256.tolist()
    assert set(two.prov_world_size) == {2}
    measured = two[two.stop_val > 0]
    assert (measured.objective_grad_comm_bytes > 0).all()
    # unregularised CG fits more of the data at each iteration: the PSNR first rises
    assert one.objective_psnr_db.iloc[4] > one.objective_psnr_db.iloc[0]


@pytest.mark.parametrize(("solver", "nproc", "message"), [
    ({**PNP, "distribute_denoiser": False}, 7,
     "distribute_physics: 6 operator(s) for 7 ranks leaves ranks without work"),
    ({**PNP, "distribute_physics": False, "tile_size": 32}, 5,
     "distribute_denoiser: 4 tile(s) in 2 batch(es) of tiles_per_batch 2 for 5 ranks leaves "
     "ranks without work"),
    # whole batches are dealt: 9 tiles in batches of 4 keep a fourth rank idle
    ({**PNP, "distribute_physics": False, "tiles_per_batch": 4}, 4,
     "distribute_denoiser: 9 tile(s) in 3 batch(es) of tiles_per_batch 4 for 4 ranks"),
    ({**PNP, "distribute_physics": False, "distribute_denoiser": False}, 2,
     "2 ranks but neither distribute_physics nor distribute_denoiser is true"),
])
def test_ranks_without_work_are_refused_before_the_run(benchmark, write_config, solver, nproc,
                                                       message):
    done = run(benchmark, write_config(experiment([{"pnp": solver}])), "bad", "--nproc",
               str(nproc))
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (benchmark / "outputs" / "bad.parquet").exists()


def _failure_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("[scalebench] FAILED")]


def _only_the_failure_line_on_the_terminal(done: subprocess.CompletedProcess) -> str:
    """The one failure line; the terminal holds no traceback, escape code or peer error."""
    failures = _failure_lines(done.stderr)
    assert len(failures) == 1, done.stderr[-3000:]
    terminal = done.stdout + done.stderr
    for absent in ("Traceback", "\x1b", "Connection closed by peer"):
        assert absent not in terminal, terminal[-3000:]
    return failures[0]


def test_a_failing_rank_ends_the_run_within_bounded_time(benchmark, write_config):
    """Rank 1 raises at its second iteration while rank 0 waits in a collective."""
    config = write_config(experiment([{"pnp": {**PNP, "max_iter": 4}}]))
    env = {**os.environ, "SCALEBENCH_FAIL_RANK": "1"}
    started_at = time.time()
    done = subprocess.run([sys.executable, "-m", "scalebench", "run", str(config),
                           "--benchmark", str(benchmark), "--output", "f", "--no-html",
                           "--nproc", "2"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    ended_at = time.time()
    assert done.returncode == 1, done.stderr[-3000:]
    failure = _only_the_failure_line_on_the_terminal(done)
    assert "(rank 1): exited with status 1 at iteration 1/4: RuntimeError: injected failure " \
           "on rank 1" in failure
    assert "no result file was written" in done.stderr
    assert not list((benchmark / "outputs").glob("*.parquet"))
    assert not list((benchmark / "outputs").glob(".staging-*"))
    logs = {p.name.split(".", 1)[1]: p.read_text()
            for p in (benchmark / "outputs" / "f" / "logs").iterdir()}
    log = Path(failure.rsplit("; log: ", 1)[1])
    assert log.parent == benchmark / "outputs" / "f" / "logs" and log.name.endswith(".rank1.log")
    assert "Traceback" in logs["rank1.log"] and "injected failure on rank 1" in logs["rank1.log"]
    # Rank 1's log was last written as its process ended, just after its failure (the log
    # keeps its time when moved). The others end within the launcher's grace (SIGTERM, then
    # SIGKILL), not after a collective's own timeout (gloo: 600 s); the margin is for a loaded
    # machine's exit and clean-up. From the start, a loose bound covers rank 1's own exit.
    rank1_ended_at = log.stat().st_mtime
    assert ended_at - rank1_ended_at < 2 * RankGroup.grace_s + 30
    assert ended_at - started_at < 240


@pytest.mark.parametrize(("target", "where"), [
    ("scalebench.benchopt_glue", r" at iteration \d+/300"),  # its wrapper says where it was
    ("scalebench.launch.rank_entry", ""),  # the launcher sees the process end
])
def test_a_rank_killed_by_a_signal_is_named_with_its_signal(benchmark, write_config,
                                                            target, where):
    """SIGKILL, mid-run, to rank 1's benchopt process or to its wrapper (whose benchopt then
    ends too): the failure names rank 1 and the signal, not rank 0's lost connection."""
    config = write_config({**experiment([{"pnp": {**PNP, "max_iter": 300}}]), "max-runs": 400})
    launcher = subprocess.Popen(
        [sys.executable, "-m", "scalebench", "run", str(config), "--benchmark",
         str(benchmark), "--output", "k", "--no-html", "--nproc", "2"], cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline, log, iterating = time.monotonic() + 400, "", False
        while time.monotonic() < deadline and launcher.poll() is None and not iterating:
            found = sorted((benchmark / "outputs").glob(".staging-*/*/rank1.log"))
            log = found[0].read_text() if found else ""
            iterating = "experiment 1/1: iteration 0/300" in log
            time.sleep(0.1)
        time.sleep(1.0)  # into the iterations
        victim = rank_process(launcher.pid, 1, target)
        assert iterating and victim is not None and launcher.poll() is None, \
            log[-2000:] + launcher.stderr.read()[-2000:]
        os.kill(victim, signal.SIGKILL)
        stdout, stderr = launcher.communicate(timeout=120)
    finally:
        if launcher.poll() is None:
            launcher.kill()
    done = subprocess.CompletedProcess(launcher.args, launcher.returncode, stdout, stderr)
    assert done.returncode == 1, stderr[-3000:]
    failure = _only_the_failure_line_on_the_terminal(done)
    assert re.search(rf"\(rank 1\): killed by SIGKILL{where}, on ", failure), failure
    assert "no result file was written" in stderr


def test_one_failing_experiment_does_not_cancel_the_others(benchmark, write_config, tmp_path):
    corrupt = tmp_path / "corrupt.pth"
    corrupt.write_bytes(b"not a checkpoint")
    # the failing experiment last: its failure reaches the file after the other's publish
    solvers = [{"pnp": {**PNP, "max_iter": 2}},
               {"pnp": {**PNP, "max_iter": 2, "pretrained": str(corrupt)}}]
    done = run(benchmark, write_config(experiment(solvers)), "f", "--nproc", "2")
    assert done.returncode == 1, done.stderr[-3000:]
    assert "FAILED" in done.stderr and str(corrupt) in done.stderr
    df = rows(benchmark, "f")
    assert set(df.p_solver_pretrained) == {"auto"} and len(df) == 3
    record = json.loads(pq.read_metadata(benchmark / "outputs" / "f.parquet")
                        .metadata[b"scalebench.run"])
    assert record["status"] == "partial" and record["failures"][0]["rank"] in (0, 1)
    assert len(record["experiments"]) == 1
    # the run status names how each ended: the failed one during its set-up (no iteration)
    stops = record_stops(record)
    assert stops[record["failures"][0]["experiment"]] == Stop(FAILED)
    assert stops[record["experiments"][0]] == Stop(COMPLETE, 2, 2)
    assert not list((benchmark / "outputs").glob(".staging-*"))


def test_sigterm_keeps_finished_experiments_and_resume_completes_them(benchmark,
                                                                      write_config):
    solvers = [{"pnp": {**PNP, "max_iter": 2, "seed": seed}} for seed in range(3)]
    config = write_config(experiment(solvers))
    command = [sys.executable, "-m", "scalebench", "run", str(config), "--benchmark",
               str(benchmark), "--output", "s", "--no-html", "--nproc", "2"]
    launcher = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    result = benchmark / "outputs" / "s.parquet"
    deadline = time.monotonic() + 240
    while not result.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    launcher.send_signal(signal.SIGTERM)
    _, stderr = launcher.communicate(timeout=120)
    assert launcher.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert "stopped by SIGTERM" in stderr and "--resume --output s" in stderr
    record = json.loads(pq.read_metadata(result).metadata[b"scalebench.run"])
    assert record["status"] == "partial" and 1 <= len(record["experiments"]) < 3
    kept = rows(benchmark, "s")
    assert not list((benchmark / "outputs").glob(".staging-*"))

    resumed = subprocess.run([*command, "--resume"], cwd=REPO, capture_output=True,
                             text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    record = json.loads(pq.read_metadata(result).metadata[b"scalebench.run"])
    assert record["status"] == "complete" and len(set(record["experiments"])) == 3
    df = rows(benchmark, "s")
    assert sorted(set(df.p_solver_seed)) == [0, 1, 2] and len(df) == 9
    before = kept.set_index(["p_solver_seed", "stop_val"]).prov_result_sha256
    after = df.set_index(["p_solver_seed", "stop_val"]).prov_result_sha256
    assert before.equals(after.loc[before.index])  # finished rows were not redone
    again = subprocess.run([*command, "--resume"], cwd=REPO, capture_output=True, text=True)
    assert again.returncode == 0 and f"nothing to resume: {result} is complete" in again.stdout
    assert rows(benchmark, "s").equals(df)  # nothing run again


def test_torch_profiler_writes_one_trace_per_rank(benchmark, write_config):
    solver = {**PNP, "max_iter": 1, "profiler": "torch"}
    done = run(benchmark, write_config(experiment([{"pnp": solver}])), "t", "--nproc", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    traces = sorted(p.name for p in (benchmark / "outputs" / "t").rglob("torch_trace*.json"))
    assert traces == ["torch_trace_rank0.json", "torch_trace_rank1.json"]
    logs = sorted(p.name for p in (benchmark / "outputs" / "t" / "logs").iterdir())
    assert [name.split(".", 1)[1] for name in logs] == ["rank0.log", "rank1.log"]


def test_compile_reports_its_time_apart_and_its_speedup(benchmark, write_config, tmp_path):
    solver = {**PNP, "max_iter": 2, "compile": [True, False], "distribute_physics": False,
              "distribute_denoiser": False, "tile_size": 0}
    done = run(benchmark, write_config(experiment([{"pnp": solver}])), "c")
    assert done.returncode == 0, done.stderr[-3000:]
    df = rows(benchmark, "c")
    measured = df[(df.stop_val > 0) & df.p_solver_compile.astype(bool)]
    compile_s = measured.objective_compile_time_s.iloc[0]
    assert compile_s > 0 and math.isfinite(compile_s)
    # compiling happened at set-up: no iteration carries it
    assert (measured.objective_denoise_time_s < compile_s).all()
    assert (measured.objective_setup_time_s >= compile_s).all()
    page = tmp_path / "report.html"
    done = run_cli("report", benchmark / "outputs" / "c.parquet", "-o", page)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Compile speedup of the denoiser step" in page.read_text()


def test_ranks_given_as_parameters_run_each_experiment_on_its_own_ranks(benchmark,
                                                                        write_config):
    solver = {**PNP, "max_iter": 1, "slurm_nodes": 1, "slurm_ntasks_per_node": [1, 2],
              "tile_size, tile_overlap": [[16, 8], [24, 0]]}
    done = run(benchmark, write_config(experiment([{"pnp": solver}])), "p")
    assert done.returncode == 0, done.stderr[-3000:]
    df = rows(benchmark, "p")
    runs = df.groupby(["p_solver_slurm_ntasks_per_node", "p_solver_tile_size"])
    assert sorted(runs.prov_world_size.first().items()) == [
        ((1, 16), 1), ((1, 24), 1), ((2, 16), 2), ((2, 24), 2)]
    assert set(zip(df.p_solver_tile_size, df.p_solver_tile_overlap, strict=True)) == {
        (16, 8), (24, 0)}


def _check_ranks(rank: int, port: int, differ: bool, outcome) -> None:
    """Runs in each spawned rank: the start-up check of data and weights."""
    import torch

    from scalebench.errors import ScalebenchError
    from scalebench.rank.context import run_context
    from scalebench.rank.rank_checks import check_same_on_every_rank

    os.environ.update({"RANK": str(rank), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                       "MASTER_PORT": str(port), "LOCAL_RANK": str(rank)})
    context = run_context(torch.device("cpu"))
    torch.manual_seed(1 if differ and rank == 1 else 0)
    network = torch.nn.Linear(4, 4)
    try:
        check_same_on_every_rank(context, network, "data")
        outcome.put((rank, "same"))
    except ScalebenchError as error:
        outcome.put((rank, str(error)))


@pytest.mark.parametrize("differ", [False, True])
def test_ranks_check_that_they_start_from_identical_weights(differ):
    import torch.multiprocessing as mp

    from scalebench.launch.processes import free_port

    context = mp.get_context("spawn")
    outcome = context.Queue()
    processes = [context.Process(target=_check_ranks, args=(rank, port, differ, outcome))
                 for port in [free_port()] for rank in range(2)]
    for process in processes:
        process.start()
    results = dict(outcome.get(timeout=120) for _ in processes)
    for process in processes:
        process.join(timeout=60)
    if differ:
        assert results[0] == results[1] == ("rank 1 has other denoiser weights than rank 0: "
                                            "ranks must start from identical inputs")
    else:
        assert results == {0: "same", 1: "same"}


def test_every_algorithm_on_two_ranks_matches_one_process(benchmark, write_config):
    """Each algorithm (its data prox's conjugate gradient included) with distributed physics
    and denoiser gives one process's reconstruction bit for bit."""
    from scalebench.loops.algorithms import ALGORITHMS

    solver = {**PNP, "max_iter": 2, "algorithm": list(ALGORITHMS)}
    config = write_config(experiment([{"pnp": solver}]))
    for nproc in (1, 2):
        done = run(benchmark, config, f"a{nproc}", "--nproc", str(nproc))
        assert done.returncode == 0, done.stderr[-3000:]
    one, two = rows(benchmark, "a1"), rows(benchmark, "a2")
    assert sorted(set(one.p_solver_algorithm)) == sorted(ALGORITHMS)
    assert two.solver_name.tolist() == one.solver_name.tolist()
    assert two.prov_result_sha256.tolist() == one.prov_result_sha256.tolist()
    prox = one[one.p_solver_algorithm.isin([n for n, s in ALGORITHMS.items() if s.needs_prox])
               & (one.stop_val > 0)]
    assert (prox.objective_prox_cg_iterations >= 1).all()
    assert (two.loc[prox.index, "objective_prox_comm_bytes"] > 0).all()
