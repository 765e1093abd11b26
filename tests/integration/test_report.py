"""`scalebench report` on the results of real runs: the offline page next to the results,
scaling axes from the measured world size, merges and duplicates, bad files."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from provenance.results import UnreadableResults
from scalebench.results.report import write_report
from tests.support.cli import edited_results, run_cli


def test_scalebench_run_renders_the_offline_report_next_to_the_results(campaign):
    results, run = campaign
    report = results.with_suffix(".html")
    assert f"Report: {report}" in run.stdout
    page = report.read_text()
    for title in ("Quality vs iteration and vs time", "Per-step time",
                  "Strong scaling: speedup and parallel efficiency", "Weak scaling efficiency",
                  "Images: ground truth, initial and final estimate", "Provenance"):
        assert title in page
    assert not re.search(r"<script|<link|src=\"http|url\(", page)


def test_scaling_axes_come_from_the_measured_world_size(campaign):
    from scalebench.results.report.data import load_results
    from scalebench.results.report.scaling import per_run, strong_scaling

    results = load_results([campaign[0]])
    table = per_run(results.rows)
    assert sorted(table["prov_world_size"]) == [1, 1, 2, 2]
    view = strong_scaling(results)
    lines = view.figure.axes[0].get_lines()
    assert [list(line.get_xdata()) for line in lines[:-1]] == [[1, 2], [1, 2]]  # then ideal


def test_weak_scaling_counts_work_per_rank_not_seeds(campaign, tmp_path):
    """12 angles on 1 rank and 24 on 2 are one series; a seed growing with the ranks is not
    work, so the same runs with a constant angle count give no series."""
    from scalebench.results.report.data import load_results
    from scalebench.results.report.scaling import weak_scaling

    results, _ = campaign
    view = weak_scaling(load_results([results]))
    assert [line.get_label() for line in view.figure.axes[0].get_lines()] == [
        "num_angles/rank = 12"]
    seeded = tmp_path / "seeded.parquet"

    def seed_not_work(f):
        f["p_dataset_seed"] = f["p_dataset_num_angles"]
        f["p_dataset_num_angles"] = 12
        return f

    edited_results(results, seeded, seed_not_work)
    assert weak_scaling(load_results([seeded])).figure is None


def test_saved_estimates_are_named_by_row_digests_and_shown(campaign):
    results, _ = campaign
    frame = pd.read_parquet(results)
    estimates = results.with_suffix("") / "estimates"
    for _, rows in frame.groupby("experiment_id"):
        rows = rows.sort_values("stop_val")
        for digest in (rows.prov_result_sha256.iloc[0], rows.prov_result_sha256.iloc[-1]):
            assert (estimates / f"{digest}.npy").is_file() and (estimates /
                                                                  f"{digest}.png").is_file()
        truth = np.load(estimates / f"ground_truth_{rows.prov_data_sha256.iloc[0]}.npy")
        assert truth.shape == (1, 32, 32)
    page = results.with_suffix(".html").read_text()
    assert page.count('<figure class="estimate">') == 3 * frame.experiment_id.nunique()


def test_merge_keeps_every_experiment_and_dedup_keeps_the_latest(campaign, tmp_path):
    results, _ = campaign
    frame = pd.read_parquet(results)
    ids = sorted(frame.experiment_id.unique())
    first, second, later = tmp_path / "a.parquet", tmp_path / "b.parquet", tmp_path / "c.parquet"
    edited_results(results, first, lambda f: f[f.experiment_id.isin(ids[:2])])
    edited_results(results, second, lambda f: f[f.experiment_id.isin(ids[2:])])

    def rerun(f):  # the same experiment, run again later with other numbers
        f = f[f.experiment_id == ids[0]].copy()
        f["run_date"] = "2099-01-01T00:00:00"
        f["objective_psnr_db"] = 99.0
        return f

    edited_results(results, later, rerun)
    from scalebench.results.report.data import RUN, load_results

    merged = load_results([later, first, second])  # the later run is given first
    assert merged.rows[RUN].nunique() == 4 and len(merged.rows) == len(frame)
    assert len(merged.dropped) == 1 and merged.dropped[0]["dropped_file"] == str(first)
    kept = merged.rows[merged.rows.experiment_id == ids[0]]
    assert (kept.objective_psnr_db == 99.0).all()
    page = tmp_path / "merged.html"
    assert "1 duplicate(s) dropped" in write_report([first, second, later], page)
    assert "1 duplicate run(s) dropped" in page.read_text()


def test_one_config_on_other_rank_counts_is_not_a_duplicate(campaign, tmp_path):
    """The same config run again with another --nproc: both runs stay, labelled by ranks."""
    results, _ = campaign
    frame = pd.read_parquet(results)
    single = frame[frame.prov_world_size == 1].experiment_id.iloc[0]
    two_ranks = tmp_path / "two_ranks.parquet"

    def on_two_ranks(f):
        f = f[f.experiment_id == single].copy()
        f["prov_world_size"] = 2
        return f

    edited_results(results, two_ranks, on_two_ranks)
    from scalebench.results.report.data import RUN, load_results

    merged = load_results([results, two_ranks])
    assert merged.dropped == [] and len(merged.rows) == len(frame) + (
        frame.experiment_id == single).sum()
    assert merged.rows[RUN].nunique() == frame.experiment_id.nunique() + 1
    labels = merged.rows[merged.rows.experiment_id == single][RUN].map(merged.labels)
    assert sorted(labels.unique(), key=lambda label: label[-7:]) == [
        labels.iloc[0].removesuffix(" 2 ranks").removesuffix(" 1 ranks") + suffix
        for suffix in (" 1 ranks", " 2 ranks")]


def test_environment_difference_warns_on_the_plots_that_compare_them(campaign, tmp_path):
    results, _ = campaign
    same = tmp_path / "same.html"
    write_report([results], same)
    assert "compares runs from different environments" not in same.read_text()

    def other_gpu(f):  # the 2-rank runs measured on another GPU model
        f = f.copy()
        f.loc[f.prov_world_size == 2, "prov_gpu_models"] = "NVIDIA H200"
        return f

    edited = tmp_path / "edited.parquet"
    edited_results(results, edited, other_gpu)
    page = tmp_path / "differ.html"
    write_report([edited], page)
    text = page.read_text()
    strong = text[text.index("<h2>Strong scaling"):text.index("<h2>Weak scaling")]
    assert "compares runs from different environments (gpu_models: NVIDIA H200, none)" in strong
    assert "different environments (one table each)" in text


def test_files_missing_optional_columns_and_one_iteration_runs_still_report(campaign,
                                                                          tmp_path):
    results, _ = campaign
    bare = tmp_path / "bare.parquet"

    def strip(f):  # benchopt's own columns only, one iteration
        keep = [c for c in f.columns if not c.startswith(("prov_", "objective_grad",
                                                          "objective_denoise", "p_dataset"))]
        return f.loc[f.stop_val <= 1, keep]

    edited_results(results, bare, strip)
    page = tmp_path / "bare.html"
    write_report([bare], page)
    text = page.read_text()
    assert "Quality vs iteration" in text
    assert "Not shown: needs prov_world_size" in text
    assert "Not shown: no provenance columns" in text


def test_a_file_that_is_not_results_is_refused_in_one_line(tmp_path):
    text = tmp_path / "notes.parquet"
    text.write_text("not parquet")
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), other)
    result = run_cli("report", text, "-o", tmp_path / "r.html")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"scalebench: error: {text}: not a readable parquet file")
    with pytest.raises(UnreadableResults, match="not a benchopt results file"):
        write_report([other], tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


def test_an_output_that_cannot_be_written_is_a_one_line_error(campaign, tmp_path):
    results, _ = campaign
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    result = run_cli("report", results, "-o", blocker / "r.html")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"scalebench: error: cannot write {blocker / 'r.html'}: ")
    folder = run_cli("report", results, "-o", tmp_path / "r.html", "--png", blocker / "png")
    assert folder.returncode == 2 and folder.stderr.count("\n") == 1, folder.stderr
