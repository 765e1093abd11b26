"""What a new user sees first, on real runs: the embedded default (configs/default.yml, what
`make run` runs) compares methods with their images and closes with the best quality reached;
benchopt's own `benchopt plot` command, on that result and on a training result, draws one
figure per measure and dataset in under 30 s of CPU (matplotlib and HTML); a file that is not a
results file keeps benchopt's own error."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from scalebench.benchopt_glue.plots import (
    INFERENCE_MEASURES,
    TRAINING_MEASURES,
    measure_columns,
    view_problems,
)
from tests.support.cli import copy_benchmark, run_cli, write_experiment
from tests.support.paths import REPO

PLOT_SECONDS = 30  # the bound for benchopt plot on the default result (CPU seconds)
TRAINING = {"objective": ["supervised_training"],
            "dataset": [{"synthetic": {"image_size": 32, "task": "superres"}}],
            "solver": [{"unrolled_pgd": {"num_stages": 2, "denoiser_width": 4,
                                         "denoiser_depth": 2, "patch_size": 16, "batch_size": 2,
                                         "max_iter": 4, "eval_every": 2, "device": "cpu"}}]}


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    """configs/default.yml run as `make run` runs it, in a private benchmark copy."""
    folder = tmp_path_factory.mktemp("default")
    benchmark = copy_benchmark(folder)
    done = run_cli("run", REPO / "configs" / "default.yml", "--benchmark", benchmark,
                   "--output", "default")
    assert done.returncode == 0, done.stderr[-2000:]
    return benchmark, benchmark / "outputs" / "default.parquet", done.stdout


@pytest.fixture(scope="module")
def training_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("training")
    benchmark = copy_benchmark(folder, REPO / "benchmark_training")
    config = write_experiment(folder, TRAINING)
    done = run_cli("run", config, "--benchmark", benchmark, "--output", "training",
                   "--no-html")
    assert done.returncode == 0, done.stderr[-2000:]
    return benchmark, benchmark / "outputs" / "training.parquet", done.stdout


def _sections(page: str) -> list[str]:
    return re.findall(r"<h2>(.*?)</h2>", page)


def test_the_default_compares_methods_with_their_images_and_names_the_best(default_run):
    benchmark, path, stdout = default_run
    rows = pd.read_parquet(path)
    solvers = rows["solver_name"].str.split("[").str[0]
    assert sorted(set(solvers)) == ["denoiser", "fbp", "pnp"]
    assert sorted(rows.loc[solvers == "pnp", "p_solver_algorithm"].unique()) == ["drs", "pgd"]
    pnp = rows[solvers == "pnp"].sort_values("stop_val")
    for _, run in pnp.groupby("p_solver_algorithm"):
        assert run.objective_psnr_db.iloc[-1] >= run.objective_psnr_db.iloc[0] + 3.0
    page = path.with_suffix(".html").read_text()
    assert _sections(page) == [
        "Result files", "Quality vs iteration and vs time", "Time to quality per method",
        "Per-step time of the reconstructions", "Standalone denoiser: time per call",
        "Peak memory vs problem size", "Images: ground truth, initial and final estimate",
        "Provenance", "Views not shown"]
    assert page.count("<h3>") == 3 + 1  # each reconstruction's images, one environment
    methods = page[page.index("<h2>Time to quality"):page.index("<h2>Per-step")]
    assert methods.count("<tr>") == 1 + 3 and "pnp algorithm=drs denoiser=tv" in methods
    # the closing line: the best PSNR any reconstruction reached, by which method, how fast
    best = rows[solvers != "denoiser"].objective_psnr_db.max()
    line = next(line for line in stdout.splitlines() if line.startswith("best PSNR"))
    assert re.fullmatch(r"best PSNR on tomography_2d: ([\d.]+) dB, by (pnp|fbp) .*, after "
                        r"[\d.]+ s of solver time \(iteration \d+, set-up excluded\)", line)
    assert float(line.split(": ")[1].split(" dB")[0]) == pytest.approx(best, abs=0.01)
    assert f"<p><b>B{line[1:]}.</b></p>" in page


def _benchopt_plot(benchmark: Path, path: Path, *options: str) -> tuple[float, str]:
    """Run `benchopt plot` on ``path``; its CPU seconds (user and system: on a machine shared
    with other work its wall time measures the others too) and its output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-m", "benchopt", "plot", str(benchmark), "-f",
                           str(path), "--no-display", *options], cwd=REPO, capture_output=True,
                          text=True, timeout=300, check=False,
                          env={**os.environ, "MPLBACKEND": "Agg"})
    assert done.returncode == 0, done.stderr[-2000:]
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, done.stdout


@pytest.mark.parametrize("which", ["inference", "training"])
def test_benchopt_plot_draws_one_figure_per_measure_and_dataset(which, default_run,
                                                                training_run):
    benchmark, path, _ = default_run if which == "inference" else training_run
    measures = INFERENCE_MEASURES if which == "inference" else TRAINING_MEASURES
    rows = pd.read_parquet(path)
    drawn = measure_columns(rows, measures)
    expected = len(drawn) * rows["dataset_name"].nunique()
    assert expected >= 4  # headline quality, steps' time and memory
    config = yaml.safe_load((benchmark / "config.yml").read_text())
    assert view_problems(config, tuple(drawn)) == []  # every view names a drawn column

    seconds, _ = _benchopt_plot(benchmark, path, "--no-html")
    figures = sorted((benchmark / "outputs").glob("*.pdf"))
    assert len(figures) == expected and seconds < PLOT_SECONDS, (figures, seconds)
    assert {f.name.split("_objective_")[1].removesuffix("_Time.pdf") for f in figures} == \
        {c.removeprefix("objective_") for c in drawn}

    seconds, _ = _benchopt_plot(benchmark, path, "--html")
    page = next((benchmark / "outputs").glob(f"{benchmark.name}_{path.stem}.html")).read_text()
    plots = json.loads(re.search(r"window\._plots = (.*);\n", page).group(1))
    assert list(plots) == ["measures"] and seconds < PLOT_SECONDS
    assert len(plots["measures"]) == expected
    for key, plot in plots["measures"].items():
        assert plot["data"] and all(len(c["x"]) == len(c["y"]) > 0 for c in plot["data"]), key


def test_benchopt_plot_on_a_file_that_is_not_results_keeps_benchopt_s_error(default_run):
    benchmark, _, _ = default_run
    notes = benchmark / "outputs" / "notes.parquet"
    notes.write_text("not parquet")
    done = subprocess.run([sys.executable, "-m", "benchopt", "plot", str(benchmark), "-f",
                           str(notes), "--no-html", "--no-display"], cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False)
    notes.unlink()
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("pyarrow.lib.ArrowInvalid") and "scalebench" not in last, last
