"""docs/extending.md's files, extracted verbatim, run in a copy of the benchmark: the solver
and dataset files under `scalebench run` (validation from their own Param specs), the
denoiser file under `scalebench run` and `benchopt run`, their rows and replay, and bad input
refused in one line."""

from __future__ import annotations

import re
import subprocess
import sys

import pandas as pd
import yaml

from tests.support.cli import benchopt_suite, copy_benchmark, run_cli, suite_passed
from tests.support.paths import REPO


def page_files() -> dict[str, str]:
    """Each ``<!-- file: PATH -->`` block of docs/extending.md, by PATH."""
    text = (REPO / "docs" / "extending.md").read_text()
    blocks = re.findall(r"<!-- file: (\S+) -->\n```\w*\n(.*?)```", text, re.S)
    return dict(blocks)


def test_page_solver_file_runs_under_scalebench_and_replays(tmp_path):
    files = page_files()
    assert set(files) == {"solvers/heavy_ball.py", "datasets/blurred_shapes.py",
                          "heavy_ball.yml", "denoisers/median.py", "median.yml"}
    benchmark = copy_benchmark(tmp_path)
    for path in ("solvers/heavy_ball.py", "datasets/blurred_shapes.py"):
        (benchmark / path).write_text(files[path])
    config = tmp_path / "heavy_ball.yml"
    config.write_text(files["heavy_ball.yml"])
    done = run_cli("run", config, "--benchmark", benchmark, "--output", "hb", "--no-html")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = pd.read_parquet(benchmark / "outputs" / "hb.parquet")
    assert sorted(set(rows.p_solver_momentum)) == [0.3, 0.6]
    assert sorted(set(rows.dataset_name.str.split("[").str[0])) == ["blurred_shapes",
                                                                    "tomography_2d"]
    assert set(rows.stop_val) == {0, 1, 2, 3, 4, 5} and len(rows) == 4 * 6
    measured = rows[rows.stop_val > 0]
    assert (measured.objective_grad_time_s > 0).all() and \
        (measured.objective_denoise_time_s > 0).all()
    assert rows.solver_name.str.startswith("heavy_ball[").all()
    assert rows.prov_config_hash.str.len().eq(64).all() and rows.prov_code_commit.notna().all()
    # the momentum changes the reconstruction
    blurred = rows[rows.dataset_name.str.startswith("blurred_shapes")]
    last = blurred[blurred.stop_val == 5].set_index("p_solver_momentum").objective_psnr_db
    assert last[0.3] != last[0.6]
    first = blurred[blurred.stop_val == 0].objective_psnr_db
    assert (last.to_numpy() > first.to_numpy()).all()  # the reconstruction improves
    replay = run_cli("replay", benchmark / "outputs" / "hb.parquet", "--benchmark", benchmark)
    assert replay.returncode == 0, replay.stdout + replay.stderr[-2000:]
    verdicts = [line for line in replay.stdout.splitlines() if line.startswith(("MATCH", "DIFF"))]
    assert len(verdicts) == 4 and all(v.startswith("MATCH") for v in verdicts), verdicts
    # benchopt's own suite (`benchopt test`) on the page's solver and dataset
    suite = benchopt_suite(benchmark, tmp_path, "-k", "heavy_ball or blurred_shapes", "-rA")
    assert suite_passed(suite), suite.stdout[-3000:]
    ran = {line.split("::")[1].strip() for line in suite.stdout.splitlines()
           if line.startswith("PASSED") and "::" in line}
    assert {"test_solver_run[heavy_ball-synthetic]",
            "test_dataset_get_data[blurred_shapes]"} <= ran, suite.stdout[-3000:]


def test_page_solver_bad_parameter_is_refused_before_anything_runs(tmp_path):
    files = page_files()
    benchmark = copy_benchmark(tmp_path)
    for path in ("solvers/heavy_ball.py", "datasets/blurred_shapes.py"):
        (benchmark / path).write_text(files[path])
    experiment = yaml.safe_load(files["heavy_ball.yml"])
    experiment["solver"] = [{"heavy_ball": {"momentum": 1.5}}]
    config = tmp_path / "bad.yml"
    config.write_text(yaml.safe_dump(experiment))
    done = run_cli("run", config, "--benchmark", benchmark, "--output", "bad", "--no-html")
    assert done.returncode == 2
    assert "solver 'heavy_ball': parameter 'momentum' must be a number >= 0.0 <= 1.0, got 1.5" \
        in done.stderr
    assert not (benchmark / "outputs" / "bad.parquet").exists()
    experiment["solver"] = [{"heavy_ball": {"max_iter": 1}}]
    experiment["dataset"] = [{"blurred_shapes": {"blur_sigma": 0.0}}]
    config.write_text(yaml.safe_dump(experiment))
    done = run_cli("run", config, "--benchmark", benchmark, "--output", "bad", "--no-html")
    assert done.returncode == 2
    assert "dataset 'blurred_shapes': parameter 'blur_sigma' must be a number >= 0.1, got 0.0" \
        in done.stderr


def test_page_denoiser_file_runs_under_scalebench_and_benchopt(tmp_path):
    files = page_files()
    benchmark = copy_benchmark(tmp_path)
    (benchmark / "denoisers").mkdir()
    (benchmark / "denoisers" / "median.py").write_text(files["denoisers/median.py"])
    config = tmp_path / "median.yml"
    config.write_text(files["median.yml"])
    done = run_cli("run", config, "--benchmark", benchmark, "--output", "median", "--no-html")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = pd.read_parquet(benchmark / "outputs" / "median.parquet")
    assert set(rows.p_solver_denoiser) == {"median"} and len(rows) == 2 * 6
    assert (rows.prov_denoiser_architecture == '{"name": "median"}').all()
    assert (rows[rows.stop_val > 0].objective_denoise_time_s > 0).all()
    psnr = rows.pivot(index="stop_val", columns="p_solver_tile_size", values="objective_psnr_db")
    assert psnr[0].tolist() == psnr[32].tolist()  # tiles overlapping by its radius are exact
    assert psnr[0].iloc[-1] > psnr[0].iloc[0]
    replay = run_cli("replay", benchmark / "outputs" / "median.parquet", "--benchmark",
                     benchmark)
    verdicts = [line for line in replay.stdout.splitlines() if line.startswith(("MATCH", "DIFF"))]
    assert len(verdicts) == 2 and all(v.startswith("MATCH") for v in verdicts), \
        replay.stdout + replay.stderr[-2000:]
    plain = subprocess.run(
        [sys.executable, "-m", "benchopt", "run", str(benchmark), "--config", str(config),
         "--no-plot", "--no-display", "--output", "plain"],
        capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path)
    assert plain.returncode == 0, plain.stdout[-2000:] + plain.stderr[-2000:]
    benchopt_rows = pd.read_parquet(benchmark / "outputs" / "plain.parquet")
    key = ["p_solver_tile_size", "stop_val"]
    assert benchopt_rows.sort_values(key).objective_psnr_db.tolist() == \
        rows.sort_values(key).objective_psnr_db.tolist()


def test_a_denoiser_file_reusing_a_shipped_name_is_refused_before_anything_runs(tmp_path):
    files = page_files()
    benchmark = copy_benchmark(tmp_path)
    (benchmark / "denoisers").mkdir()
    (benchmark / "denoisers" / "median.py").write_text(
        files["denoisers/median.py"].replace('DenoiserSpec("median"', 'DenoiserSpec("tv"'))
    config = tmp_path / "median.yml"
    config.write_text(files["median.yml"])
    done = run_cli("run", config, "--benchmark", benchmark, "--output", "bad", "--no-html")
    assert done.returncode == 2
    assert "the name 'tv' is already defined by scalebench; give it another name" in done.stderr
    assert not (benchmark / "outputs" / "bad.parquet").exists()
