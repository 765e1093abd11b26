"""Provenance stamped by real runs, `scalebench check`, and bit-for-bit `scalebench replay`:
one replay through the command line re-runs the archive, the verdicts on edited archives are
read in-process from replay's comparisons."""

import hashlib
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from provenance import canonical_json, collect, config_hash
from provenance.schema import FIELDS, METADATA_KEY, SCHEMA_VERSION
from scalebench.errors import ScalebenchError
from scalebench.results.replay.checks import (
    ArchivedRun,
    changed_environment,
    load_runs,
    parse_rows,
    verdict,
)
from scalebench.results.replay.rerun import current_environment, replay
from tests.support.cli import copy_benchmark, edited_results, run_cli, tiny_experiment
from tests.support.paths import REPO


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    """One tiny experiment (two solvers) run through `scalebench run`; the benchmark copy."""
    root = tmp_path_factory.mktemp("archive")
    benchmark = copy_benchmark(root)
    config = root / "tiny.yml"
    config.write_text(json.dumps(tiny_experiment()))
    result = run_cli("run", config, "--benchmark", benchmark, "--output", "tiny", "--no-html")
    assert result.returncode == 0, result.stderr[-2000:]
    return benchmark, benchmark / "outputs" / "tiny.parquet"


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_every_row_carries_complete_provenance(archive):
    _, results = archive
    df = pd.read_parquet(results)
    assert len(df) == 7
    for field in FIELDS:
        assert f"prov_{field}" in df.columns, field
    assert not [c for c in df.columns if c.startswith("objective_prov_")]
    assert df.prov_complete.all() and (df.prov_hostname != "").all()
    assert df.prov_code_commit.iloc[0] == subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
        check=True).stdout.strip()
    assert df.groupby("solver_name").prov_config_hash.nunique().eq(1).all()
    assert df.prov_config_hash.nunique() == 2
    pnp = df[df.solver_name.str.startswith("pnp")]
    assert pnp.prov_result_sha256.nunique() == 4  # the estimate changes every iteration
    config = json.loads(pnp.prov_config_json.iloc[0])
    assert config["dataset"] == {"name": "tomography_2d", "params": {
        "image_size": 32, "noise_level": 0.05, "num_angles": 12, "num_operators": 2,
        "projector": "auto", "seed": 0}}
    assert config["solver"]["params"]["max_iter"] == 3
    assert pnp.prov_deterministic_mode.all() and pnp.prov_deterministic_algorithms.all()
    document = json.loads(pq.read_metadata(results).metadata[METADATA_KEY])
    assert document["schema_version"] == SCHEMA_VERSION and len(document["records"]) == 2


def test_check_accepts_the_archive(archive):
    _, results = archive
    result = run_cli("check", results)
    assert result.returncode == 0, result.stdout
    assert "7 rows, complete provenance" in result.stdout


def test_replay_matches_bit_for_bit_and_leaves_the_archive_untouched(archive):
    benchmark, results = archive
    before = _digest(results)
    result = run_cli("replay", results, "--benchmark", benchmark)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith(("MATCH", "DIFF"))]
    assert len(lines) == 2 and all(line.startswith("MATCH") for line in lines)
    assert "4 iterations equal bit for bit" in result.stdout
    assert _digest(results) == before


# --- the comparisons, in-process on the archive's rows --------------------------------------
# The CLI replay above re-ran the archive and matched it bit for bit, so its own rows stand for
# a re-run's: the tests below edit the archived side and read the verdicts replay gives.


def _run_of(frame: pd.DataFrame, solver: str) -> ArchivedRun:
    return next(run for run in load_runs(frame, None) if run.config["solver"]["name"] == solver)


def _refuse_rerun(*_):
    raise AssertionError("replay re-ran rows it should have refused")


def test_selected_rows_select_their_runs(archive):
    _, results = archive
    df = pd.read_parquet(results)
    denoiser_row = int(np.flatnonzero(df.solver_name.str.startswith("denoiser"))[0])
    selected = load_runs(df, parse_rows(str(denoiser_row), len(df)))
    assert [run.config["solver"]["name"] for run in selected] == ["denoiser"]
    assert len(selected[0].rows) == 3  # every row of the run, not only the selected one


def test_tampered_parameter_is_reported_and_nothing_runs(archive, tmp_path):
    _, results = archive

    def tamper(df):
        df["p_dataset_noise_level"] = 0.5
        return df
    tampered = edited_results(results, tmp_path / "tampered.parquet", tamper)
    before = _digest(tampered)
    verdicts = replay(tampered, None, False, _refuse_rerun)
    assert [v.status for v in verdicts] == ["TAMPERED", "TAMPERED"]
    assert "parameter 'p_dataset_noise_level' is 0.5 in the rows but 0.05 in the hashed " \
        "config" in verdicts[0].line
    assert _digest(tampered) == before


def test_one_config_on_two_rank_counts_gets_a_verdict_each(archive, tmp_path):
    """The denoiser's rows again as a 2-rank run: two runs with one config hash, each with its
    own verdict (here the 1-rank one tampered, the 2-rank one from another GPU)."""
    _, results = archive

    def two_runs(df):
        one = df[df.solver_name.str.startswith("denoiser")].copy()
        two = one.copy()
        one["p_dataset_noise_level"] = 0.5
        two["prov_world_size"] = 2
        two["prov_gpu_models"] = "NVIDIA H200"
        return pd.concat([one, two], ignore_index=True)
    both = edited_results(results, tmp_path / "both.parquet", two_runs)
    lines = [v.line for v in replay(both, None, False, _refuse_rerun)]
    assert len(lines) == 2
    assert lines[0].startswith("TAMPERED ") and "rep 0, 1 rank(s))" in lines[0]
    assert lines[1].startswith("REFUSED ") and "rep 0, 2 rank(s))" in lines[1]


def test_a_one_ulp_difference_is_found_at_its_iteration(archive):
    _, results = archive
    replayed = pd.read_parquet(results)
    archived = replayed.copy()
    row = archived.index[archived.solver_name.str.startswith("pnp")
                         & (archived.stop_val == 2)][0]
    archived.loc[row, "objective_psnr_db"] = np.nextafter(archived.loc[row, "objective_psnr_db"],
                                                          99)
    nudged = verdict(_run_of(archived, "pnp"), [], replayed)
    assert nudged.status == "DIFFER" and nudged.line.startswith("DIFFER tomography_2d x pnp")
    assert "first divergent iteration 2 (objective_psnr_db)" in nudged.detail
    assert "max ULP 1" in nudged.detail
    same = verdict(_run_of(archived, "denoiser"), [], replayed)
    assert same.status == "MATCH" and "3 iterations equal bit for bit" in same.detail


def test_other_weights_differ_by_name_even_when_forced(archive):
    _, results = archive
    replayed = pd.read_parquet(results)
    archived = replayed.copy()
    pnp = archived.solver_name.str.startswith("pnp")
    archived.loc[pnp, "prov_weights_sha256"] = "ab" * 32
    ran = replayed.loc[pnp, "prov_weights"].iloc[0]
    now = replayed.loc[pnp, "prov_weights_sha256"].iloc[0][:12] or "-"
    for differences in ([], ["gpu_models 'none' here vs 'NVIDIA H200' archived"]):
        weights = verdict(_run_of(archived, "pnp"), differences, replayed)
        assert weights.status == "DIFFER"
        assert weights.detail == (f"the denoiser weights that ran differ: {ran} sha256 "
                                  f"abababababab archived vs {ran} sha256 {now} now")
        assert verdict(_run_of(archived, "denoiser"), differences, replayed).status == "MATCH"


def test_environment_mismatch_is_refused_unless_forced(archive, tmp_path):
    _, results = archive

    def elsewhere(df):
        df["prov_gpu_models"] = "NVIDIA H200"
        return df
    moved = edited_results(results, tmp_path / "moved.parquet", elsewhere)
    refused = replay(moved, None, False, _refuse_rerun)
    assert [v.status for v in refused] == ["REFUSED", "REFUSED"]
    assert "gpu_models 'none' here vs 'NVIDIA H200'" in refused[0].detail
    archived = pd.read_parquet(moved)
    differences = changed_environment(_run_of(archived, "pnp"), current_environment())
    assert "gpu_models 'none' here vs 'NVIDIA H200' archived" in differences
    forced = verdict(_run_of(archived, "pnp"), differences, pd.read_parquet(results))
    # the re-run is the archive itself: equal to the bit, and said so
    assert forced.status == "MATCH" and "equal bit for bit (forced" in forced.detail


@pytest.mark.parametrize(("column", "value", "message"), [
    ("prov_torch", "2.0.0", "here vs '2.0.0' archived"),
    ("prov_numpy", "1.0.0", "here vs '1.0.0' archived"),
    ("prov_astra", "", "astra"),
    ("prov_cpu_model", "Some Other CPU", "cpu_model"),
    ("prov_code_dirty", True, "uncommitted changes in the working tree"),
])
def test_package_cpu_or_dirty_tree_difference_is_refused_not_differ(archive, tmp_path, column,
                                                                     value, message):
    _, results = archive

    def elsewhere(df):
        df[column] = value
        if column == "prov_code_dirty":
            df["prov_code_diff_sha256"] = "0" * 64
        return df
    moved = edited_results(results, tmp_path / "moved.parquet", elsewhere)
    verdicts = replay(moved, None, False, _refuse_rerun)
    assert [v.status for v in verdicts] == ["REFUSED", "REFUSED"]
    assert message in verdicts[0].detail


def test_an_archive_from_before_a_parameter_existed_matches_its_rerun(archive):
    """A run archived before a parameter existed is read with that parameter at its default:
    its re-run is the same config as today's code reads it."""
    _, results = archive
    replayed = pd.read_parquet(results)
    archived = replayed.copy()
    pnp = archived.solver_name.str.startswith("pnp")
    config = json.loads(archived.loc[pnp, "prov_config_json"].iloc[0])
    del config["solver"]["params"]["eval_every"]
    text = canonical_json(config)
    archived.loc[pnp, "prov_config_json"] = text
    archived.loc[pnp, "prov_config_hash"] = config_hash(text)
    older = verdict(_run_of(archived, "pnp"), [], replayed)
    assert older.status == "MATCH" and "bit for bit" in older.detail


def test_a_rerun_without_matching_rows_says_why(archive):
    """An archived parameter value no re-run has: no rows match, and the verdict says which
    parameter differs."""
    _, results = archive
    replayed = pd.read_parquet(results)
    archived = replayed.copy()
    pnp = archived.solver_name.str.startswith("pnp")
    config = json.loads(archived.loc[pnp, "prov_config_json"].iloc[0])
    config["solver"]["params"]["eval_every"] = 7
    text = canonical_json(config)
    archived.loc[pnp, "prov_config_json"] = text
    archived.loc[pnp, "prov_config_hash"] = config_hash(text)
    other = verdict(_run_of(archived, "pnp"), [], replayed)
    assert other.status == "DIFFER" and "0 replayed rows" not in other.detail
    assert "the re-run produced no rows with config hash" in other.detail
    assert "eval_every" in other.detail


BAD_FILES = {
    "truncated": lambda source, path: path.write_bytes(source.read_bytes()[:2000]),
    "text": lambda source, path: path.write_text("solver,psnr\npnp,30\n"),
    "other_tool": lambda source, path: pd.DataFrame({"loss": [0.1, 0.2]}).to_parquet(path),
}


@pytest.mark.parametrize("kind", sorted(BAD_FILES))
def test_unreadable_files_exit_2_for_check_and_replay(archive, tmp_path, kind):
    _, results = archive
    path = tmp_path / f"{kind}.parquet"
    BAD_FILES[kind](results, path)
    before = _digest(path)
    for command in ("check", "replay"):
        result = run_cli(command, path)
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert result.stderr.startswith("scalebench: error: ")
        assert result.stderr.strip().count("\n") == 0
        assert "not a readable parquet file" in result.stderr or \
            "not a benchopt results file" in result.stderr
    assert _digest(path) == before


def test_rows_without_provenance(archive, tmp_path):
    _, results = archive
    bare = edited_results(results, tmp_path / "bare.parquet",
                        lambda df: df.drop(columns=[c for c in df if c.startswith("prov_")]))
    check = run_cli("check", bare)
    assert check.returncode == 1 and "column 'prov_schema_version' is missing" in check.stdout
    replay = run_cli("replay", bare)
    assert replay.returncode == 2 and "rows without provenance" in replay.stderr
    incomplete = edited_results(results, tmp_path / "incomplete.parquet",
                              lambda df: df.assign(prov_complete=False, prov_missing="gpus"))
    check = run_cli("check", incomplete)
    assert check.returncode == 1 and "could not read: gpus" in check.stdout


def test_pickled_values_are_refused_never_unpickled(archive, tmp_path):
    _, results = archive
    marker = tmp_path / "unpickled"
    # A pickle that would create a file if it were ever loaded.
    payload = b"\x00benchopt-pkl\x00" + (
        b"cos\nsystem\n(S'touch " + str(marker).encode() + b"'\ntR.")
    table = pq.read_table(results)
    table = table.append_column("p_solver_kernel", pa.array([payload] * len(table),
                                                           type=pa.large_binary()))
    path = tmp_path / "pickled.parquet"
    pq.write_table(table, path)
    for command in ("check", "replay"):
        result = run_cli(command, path)
        assert result.returncode == 2
        assert "column 'p_solver_kernel' holds an encoded (pickled) object" in result.stderr
    assert not marker.exists()


def test_bad_rows_argument(archive):
    _, results = archive
    result = run_cli("replay", results, "--rows", "0,99")
    assert result.returncode == 2 and "row 99 is outside 0-6" in result.stderr
    with pytest.raises(ScalebenchError, match="--rows must look like '0,3-5'"):
        parse_rows("first", 7)


def _hostname_namespace_works() -> bool:
    probe = subprocess.run(["unshare", "-u", "hostname", "probe-host"], capture_output=True,
                           check=False)
    return probe.returncode == 0


def test_job_array_tasks_on_two_hosts_stamp_their_own_rows(tmp_path, write_config):
    """Two tasks of one SLURM job array, each in its own process, host and environment."""
    benchmark = copy_benchmark(tmp_path)
    config = write_config(tiny_experiment(solver=[{"denoiser": {"max_iter": 1}}]))
    separate_hosts = _hostname_namespace_works()
    for task, host in ((0, "node-a"), (1, "node-b")):
        env = {"SLURM_JOB_ID": "4242", "SLURM_ARRAY_TASK_ID": str(task),
               "SLURM_JOB_NODELIST": host, "CUDA_VISIBLE_DEVICES": str(task)}
        command = [sys.executable, "-m", "scalebench", "run", str(config), "--benchmark",
                   str(benchmark), "--output", f"task{task}", "--no-html"]
        if separate_hosts:  # a UTS namespace gives the task its own host name
            command = ["unshare", "-u", "sh", "-c", f'hostname {host} && exec "$@"', "sh",
                       *command]
        result = subprocess.run(command, cwd=REPO, capture_output=True, text=True,
                                env={**_base_env(), **env}, check=False, timeout=600)
        assert result.returncode == 0, result.stderr[-2000:]
    frames = [pd.read_parquet(benchmark / "outputs" / f"task{t}.parquet") for t in (0, 1)]
    merged = pd.concat(frames, ignore_index=True)
    assert merged.groupby("prov_slurm_array_task_id").prov_slurm_nodelist.unique().to_dict() \
        == {"0": ["node-a"], "1": ["node-b"]}
    envs = merged.prov_env.map(lambda e: json.loads(e)["CUDA_VISIBLE_DEVICES"])
    assert (envs == merged.prov_slurm_array_task_id).all()
    assert set(merged.prov_slurm_job_id) == {"4242"}
    if separate_hosts:
        assert merged.groupby("prov_slurm_array_task_id").prov_hostname.unique().to_dict() \
            == {"0": ["node-a"], "1": ["node-b"]}


def _base_env():
    return {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}


# --- archives written before a parameter was renamed ----------------------------------------
# tests/fixtures/old_parameter_names.parquet: CT and radio runs of `pnp` with tiles, written
# (2026-12-03, on an 'AMD EPYC' CPU) when the tiles were patch_size / overlap /
# max_batch_size and radio's transform library was 'operator', and before pnp had an
# 'algorithm'.


def test_rows_with_old_parameter_names_replay_under_their_new_names(tmp_path):
    """Under the CPU model that wrote them, bit for bit, or within the tolerance where that
    name hides another instruction set (a virtual CPU named only 'AMD EPYC': the fixture's
    machine and this one share the name, and on 2026-12-06 their floating-point paths
    differed); on another model the forced replay names the CPU and compares within its
    tolerance."""
    archive = tmp_path / "old.parquet"
    shutil.copy(REPO / "tests" / "fixtures" / "old_parameter_names.parquet", archive)
    archived = pd.read_parquet(archive)
    assert {"p_solver_patch_size", "p_solver_max_batch_size", "p_dataset_operator"} <= \
        set(archived.columns)
    (archived_cpu,) = archived.prov_cpu_model.unique()
    here_cpu = collect(refresh=True)["cpu_model"]
    result = run_cli("replay", archive, "--force")
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    verdicts = [line for line in result.stdout.splitlines()
                if line.startswith(("MATCH", "DIFF", "REFUSED"))]
    assert len(verdicts) == 2, result.stdout
    assert all(line.startswith("MATCH") for line in verdicts), verdicts
    if here_cpu == archived_cpu:
        assert all("equal bit for bit (forced;" in line or "equal within rtol" in line
                   for line in verdicts), verdicts
    else:
        assert all(f"cpu_model '{here_cpu}' here vs '{archived_cpu}' archived" in line
                   for line in verdicts), verdicts
    for old, new in (("patch_size", "tile_size"), ("max_batch_size", "tiles_per_batch"),
                     ("overlap", "tile_overlap"), ("operator", "backend")):
        assert f"parameter '{old}' is now '{new}'" in result.stderr
