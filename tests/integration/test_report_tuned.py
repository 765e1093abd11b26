"""The report's view "methods at their tuned best" on a real tuning (seconds-long CT, eight
trials on one validation image: tests/support/tuning.py) and the tuned config's run on two
test images beside the untuned method: the tuned setting's test quality over its images, the
untuned one's beside it, the tuning's cost; and the figures over images that the report and
``compare`` give."""

from __future__ import annotations

import re

import pandas as pd
import pytest
import yaml

from tests.support.cli import run_cli, write_experiment
from tests.support.tuning import TINY, TRIALS

TEST_IMAGES = ["shepp_logan", "phantom-1"]


@pytest.fixture(scope="module")
def tuned_run(ct_tuning, tmp_path_factory):
    """(tuning results, test run results, tuned setting): the session's CT tuning and its
    tuned config's run on two test images beside the untuned method."""
    out, tuning = ct_tuning
    assert tuning.returncode == 0, tuning.stdout[-3000:] + tuning.stderr[-3000:]
    folder = tmp_path_factory.mktemp("tuned")
    tuned = yaml.safe_load((out / "ct_tune.yml").read_text())
    (entry,) = tuned["dataset"]
    entry["tomography_2d"]["image"] = TEST_IMAGES  # two of the four keep it short
    tuned["solver"].append({"pnp": dict(TINY["solver"][0]["pnp"])})  # untuned
    test = run_cli("run", write_experiment(folder, tuned, "test.yml"), "--outputs",
                   folder / "test", "--output", "test", "--no-html")
    assert test.returncode == 0, test.stdout[-3000:] + test.stderr[-3000:]
    (record,) = tuned["tuned"].values()
    return out / "ct_tune.parquet", folder / "test" / "test.parquet", \
        record["setting"]["denoiser_sigma"]


def _cells(html: str, view: str) -> list[list[str]]:
    section = html.split(f"<h2>{view}</h2>", 1)[1].split("<h2>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", section)
    return [re.findall(r"<t[dh]>(.*?)</t[dh]>", row) for row in rows]


def test_the_tuned_view_pairs_the_test_run_with_the_tuning_and_gives_its_cost(tuned_run,
                                                                             tmp_path):
    tuning, test, sigma = tuned_run
    report = tmp_path / "report.html"
    result = run_cli("report", tuning, test, "-o", report)
    assert result.returncode == 0, result.stdout + result.stderr
    header, row = _cells(report.read_text(), "Methods at their tuned best")
    cell = dict(zip(header, row, strict=True))
    rows = pd.read_parquet(test)
    best = rows.groupby("prov_config_hash").agg(
        sigma=("p_solver_denoiser_sigma", "first"), psnr=("objective_psnr_db", "max"))
    tuned = best[(best["sigma"] - sigma).abs() < 1e-12]["psnr"]
    assert len(tuned) == len(TEST_IMAGES)
    assert cell["test (tuned)"].startswith(f"{tuned.mean():.4g} ± ")
    assert cell["test (tuned)"].endswith(f", {len(TEST_IMAGES)} images")
    assert cell["test (untuned)"].startswith("denoiser_sigma=")
    assert cell["tuned setting"] == f"denoiser_sigma={sigma:g}"
    trials = pd.read_parquet(tuning).groupby("tune_trial").first()
    assert cell["trials"].startswith(f"{TRIALS} (")
    assert float(cell["CPU seconds"]) == pytest.approx(trials["tune_cpu_s"].sum(), rel=1e-2)
    assert cell["validation images"] == "phantom-101"


def test_the_view_says_when_no_test_run_is_given_and_is_not_shown_without_a_tuning(
        tuned_run, tmp_path):
    tuning, test, _ = tuned_run
    report = tmp_path / "report.html"
    assert run_cli("report", tuning, "-o", report).returncode == 0
    header, row = _cells(report.read_text(), "Methods at their tuned best")
    assert dict(zip(header, row, strict=True))["test (tuned)"] == "not run"
    assert "no test run given" in report.read_text()
    assert run_cli("report", test, "-o", report).returncode == 0
    assert "Methods at their tuned best. Not shown: needs a tuning" in report.read_text()


def test_the_report_and_compare_read_the_test_images_over_or_one_by_one(tuned_run, tmp_path):
    _, test, _ = tuned_run
    report = tmp_path / "report.html"
    assert run_cli("report", test, "-o", report).returncode == 0
    assert f"over {len(TEST_IMAGES)} images on tomography_2d" in report.read_text()
    assert run_cli("report", test, "-o", report, "--per-image").returncode == 0
    assert "image=phantom-1" in report.read_text()
    copy = tmp_path / "copy.parquet"
    copy.write_bytes(test.read_bytes())
    result = run_cli("compare", test, copy)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(TEST_IMAGES)} -> {len(TEST_IMAGES)} images" in result.stdout
