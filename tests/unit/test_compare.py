"""Comparing environments without running anything: the environment's definition and
labels, the verdict rules, the report's series, and `scalebench compare` on written files
(its JSON shape, its exit status, bad input)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from provenance.environment import (
    ENVIRONMENT_FIELDS,
    RESULT_FIELDS,
    SHOWN_FIELDS,
    differing_fields,
    environment_key,
    environment_labels,
)
from scalebench.cli import main
from scalebench.results.compare_rules import (
    HIGHER,
    LOWER,
    UNKNOWN,
    Measure,
    Thresholds,
    is_regression,
    verdict,
)
from scalebench.statistics import summary

TIME = Measure("grad (s/iteration)", "time", LOWER)
MEMORY = Measure("peak host memory (MiB)", "memory", LOWER)
QUALITY = Measure("final SSIM", "quality", HIGHER)  # no unit: a relative tolerance
AT_5, AT_10 = Thresholds(tolerance=0.05), Thresholds(tolerance=0.1)


def record(**fields) -> dict:
    base = {"prov_torch_threads": 2, "prov_image_digest": "none", "prov_code_commit": "d5adff2"
            "9e0", "prov_hostname": "node1", "prov_slurm_job_id": "17", "prov_world_size": 1,
            "prov_env": json.dumps({"OMP_NUM_THREADS": "2", "CUDA_VISIBLE_DEVICES": "0"})}
    return {**base, **{f"prov_{k}": v for k, v in fields.items()}}


# --- the environment ---------------------------------------------------------------------

def test_hosts_jobs_and_which_gpus_a_job_got_are_no_part_of_the_environment():
    other_node = record(hostname="node2", slurm_job_id="18",
                        env=json.dumps({"OMP_NUM_THREADS": "2", "CUDA_VISIBLE_DEVICES": "3"}))
    assert environment_key(record()) == environment_key(other_node)
    assert not set(SHOWN_FIELDS) & set(ENVIRONMENT_FIELDS)
    assert set(RESULT_FIELDS) <= set(ENVIRONMENT_FIELDS)


def test_threads_image_commit_and_variables_change_the_environment():
    for change in ({"torch_threads": 1}, {"image_digest": "sha256:3f2a"},
                   {"code_commit": "6f41fe9"}, {"env": json.dumps({"OMP_NUM_THREADS": "1"})}):
        assert environment_key(record(**change)) != environment_key(record()), change


def test_a_merged_integer_column_is_the_same_environment():
    """A file lacking a column makes pandas' merged integers floats: 2.0 is still 2."""
    assert environment_key(record(torch_threads=2.0)) == environment_key(record())


def test_differing_fields_give_each_records_value_in_order():
    records = [record(), record(torch_threads=1, hostname="node9")]
    assert differing_fields(records) == {"torch_threads": ["2", "1"]}
    assert differing_fields(records, SHOWN_FIELDS) == {"hostname": ["node1", "node9"]}


def test_labels_name_the_differing_fields_short():
    assert environment_labels([record(), record(torch_threads=1)]) == ["threads=2",
                                                                       "threads=1"]
    assert environment_labels([record(image_digest="sha256:3f2a1b0c9d"), record()]) == [
        "image 3f2a1b0…", "image host"]
    assert environment_labels([record(code_commit="d5adff2abc"),
                               record(code_commit="6f41fe9abc")]) == ["commit d5adff2",
                                                                      "commit 6f41fe9"]
    assert environment_labels([record(), record()]) == ["", ""]
    many = record(torch_threads=1, image_digest="sha256:ab", code_commit="ff", python="3.12")
    assert environment_labels([record(), many])[1].endswith(" +1 more")


# --- the verdict rules -------------------------------------------------------------------

def test_a_difference_within_the_tolerance_is_the_same():
    assert verdict(TIME, summary([1.0, 1.0, 1.0]), summary([1.04, 1.04, 1.04]), AT_5) == "same"
    assert verdict(TIME, summary([1.0, 1.0, 1.0]), summary([1.1, 1.1, 1.1]), AT_5) == "slower"
    assert verdict(TIME, summary([1.0, 1.0, 1.0]), summary([0.8, 0.8, 0.8]), AT_5) == "faster"


def test_a_difference_within_either_sides_spread_is_the_same():
    wide = summary([0.7, 1.0, 1.3])  # spread 0.6
    assert verdict(TIME, wide, summary([1.5, 1.5, 1.5]), AT_5) == "same"
    assert verdict(TIME, summary([1.5, 1.5, 1.5]), wide, AT_5) == "same"
    assert verdict(TIME, wide, summary([1.7, 1.7, 1.7]), AT_5) == "slower"


def test_a_missing_figure_is_unknown():
    assert verdict(TIME, summary([1.0, 1.0, 1.0]), summary([9.0, 9.0, float("nan")]), AT_5) \
        == UNKNOWN  # a target one repetition never reached


def test_two_repetitions_a_side_are_judged_by_their_spread():
    assert summary([1.0, 1.2]).spread == pytest.approx(0.2)
    assert verdict(TIME, summary([1.0, 1.2]), summary([1.25, 1.3]), AT_5) == "same"  # within 0.2
    assert verdict(TIME, summary([1.0, 1.2]), summary([1.5, 1.5]), AT_5) == "slower"


def test_which_way_is_worse_depends_on_the_measure():
    low, high = summary([10.0] * 3), summary([20.0] * 3)
    assert verdict(MEMORY, low, high, AT_10) == "larger" and is_regression(MEMORY, "larger")
    assert verdict(QUALITY, high, low, AT_10) == "worse" and is_regression(QUALITY, "worse")
    assert verdict(QUALITY, low, high, AT_10) == "better"
    assert not is_regression(QUALITY, "better") and not is_regression(TIME, "same")


# --- written results files ----------------------------------------------------------------

def results_file(path, threads: int = 2, grad: float = 1.0, repetitions: int = 3,
                 config: str = "c0ffee", digest: str = "d") -> str:
    rows = []
    for rep in range(repetitions):
        for iteration in range(4):
            rows.append({"solver_name": "pnp[denoiser=tv]", "dataset_name":
                         "tomography_2d[image_size=32]", "objective_name": "imaging",
                         "stop_val": iteration, "idx_rep": rep,
                         "time": iteration * grad * 1.5, "objective_psnr_db": 20.0 + iteration,
                         "objective_grad_time_s": grad * (1 + 0.01 * rep),
                         "objective_grad_peak_host_rss_mib": 100.0,
                         "prov_config_hash": config, "prov_world_size": 1,
                         "prov_torch_threads": threads, "prov_hostname": "vm",
                         "prov_image_digest": "none",
                         "prov_result_sha256": f"{digest}{iteration}"})
    pd.DataFrame(rows).to_parquet(path)
    return str(path)


def test_compare_prints_json_of_the_issues_shape_and_exits_1_on_a_regression(tmp_path,
                                                                             capsys):
    base = results_file(tmp_path / "base.parquet")
    slower = results_file(tmp_path / "slower.parquet", threads=1, grad=2.0, digest="e")
    assert main(["compare", base, slower, "--format", "json"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert found["differences"] == {"torch_threads": ["2", "1"]}
    assert found["regressions"] >= 1
    experiment, = found["experiments"]
    grad, = [m for m in experiment["measures"] if m["measure"] == "grad (s/iteration)"]
    assert {"measure", "base", "candidate", "ratio", "verdict"} <= set(grad)
    assert grad["verdict"] == "slower" and grad["ratio"] == pytest.approx(2.0)
    assert experiment["bit_for_bit"] == "differ (12 of 12 rows)"
    assert experiment["largest_metric_difference"] == 0.0


def test_compare_exits_0_when_nothing_is_worse_and_says_what_it_does_not_know(tmp_path,
                                                                             capsys):
    base = results_file(tmp_path / "base.parquet")
    same = results_file(tmp_path / "same.parquet", repetitions=1)
    assert main(["compare", base, same]) == 0
    text = capsys.readouterr().out
    assert "environment: the same on both sides" in text
    assert "(spread ?)" in text and "same (single run)" in text and "bit for bit: equal" in text


def test_compare_lists_experiments_found_in_one_file_only(tmp_path, capsys):
    base = results_file(tmp_path / "base.parquet")
    both = tmp_path / "both.parquet"
    pd.concat([pd.read_parquet(base), pd.read_parquet(results_file(
        tmp_path / "other.parquet", config="beef"))]).to_parquet(both)
    assert main(["compare", base, str(both), "--format", "json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert len(found["experiments"]) == 1 and len(found["only_in_candidate"]) == 1


BAD_OPTIONS = {"tolerance": ["--tolerance", "1.5"], "tolerance text": ["--tolerance", "ten"],
               "negative tolerance": ["--tolerance", "-0.1"],
               "factor below 1": ["--factor", "0.9"], "factor text": ["--factor", "twice"],
               "factor nan": ["--factor", "nan"],
               "quality without unit": ["--quality-tolerance", "0.1"],
               "quality in percent": ["--quality-tolerance", "5%"],
               "negative quality": ["--quality-tolerance=-0.1dB"],
               "exact without matching inputs": ["--exact"]}
BAD_MESSAGES = {"tolerance": "--tolerance must be", "factor": "--factor must be",
                "quality": "--quality-tolerance must be",
                "exact": "share no experiment with matching inputs (inputs differ: "
                         "torch_threads 2 -> 1"}


@pytest.mark.parametrize("case", ["no common experiment", "not parquet", "not scalebench",
                                  "itself", *BAD_OPTIONS])
def test_bad_input_is_one_line_exit_2_and_nothing_written(case, tmp_path, capsys):
    base = results_file(tmp_path / "base.parquet")
    other = {"no common experiment": lambda: results_file(tmp_path / "o.parquet",
                                                          config="beef"),
             "not parquet": lambda: _text_file(tmp_path / "o.parquet"),
             "not scalebench": lambda: _plain_benchopt(tmp_path / "o.parquet"),
             "exact without matching inputs": lambda: results_file(tmp_path / "o.parquet",
                                                                   threads=1),
             }.get(case, lambda: base if case == "itself" else
                   results_file(tmp_path / "o.parquet"))()
    before = sorted(tmp_path.iterdir())
    assert main(["compare", base, other, *BAD_OPTIONS.get(case, [])]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1, captured.err
    assert captured.err.startswith("scalebench: error: ")
    message = BAD_MESSAGES.get(case.split()[-1], BAD_MESSAGES.get(case.split()[0], ""))
    assert message in captured.err, captured.err
    assert sorted(tmp_path.iterdir()) == before


def _text_file(path) -> str:
    path.write_text("not a parquet file\n")
    return str(path)


def _plain_benchopt(path) -> str:
    pd.DataFrame({"solver_name": ["s"], "dataset_name": ["d"], "objective_name": ["o"],
                  "stop_val": [1], "idx_rep": [0], "time": [0.1]}).to_parquet(path)
    return str(path)


def test_the_report_keeps_a_run_per_environment_labelled_by_what_differs(tmp_path):
    from scalebench.results.report.data import load_results
    from scalebench.results.report.environments_view import environments

    two = tmp_path / "two.parquet"
    one = tmp_path / "one.parquet"
    results_file(two), results_file(one, threads=1)
    merged = load_results([two, one])
    assert merged.dropped == [] and len(merged.runs()) == 6
    assert sorted({label.split()[-1] for label in merged.labels.values()}) == [
        "threads=1", "threads=2"]
    view = environments(merged)
    assert view.figure is not None
    assert [row[1] for row in view.summary.rows] == ["threads=2", "threads=1"]
    copy = tmp_path / "copy.parquet"
    copy.write_bytes(two.read_bytes())
    assert len(load_results([two, copy]).dropped) == 3  # one environment: duplicates


def test_time_views_draw_repetitions_as_their_median_and_band(tmp_path):
    from scalebench.results.report.data import load_results
    from scalebench.results.report.repetitions import time_bands

    path = tmp_path / "three.parquet"
    results_file(path)
    rows = load_results([path]).rows
    rows.loc[rows["idx_rep"] == 2, "time"] *= 3  # one slow repetition
    bands = time_bands(rows, "objective_psnr_db")
    first, *others = list(dict.fromkeys(rows["run"]))
    assert bands[first] is not None and all(bands[run] is None for run in others)
    last = bands[first].loc[3]
    assert (last["median"], last["min"], last["max"]) == (4.5, 4.5, 13.5)


def test_training_rows_are_compared_by_steps_throughput_and_memory(tmp_path, capsys):
    def training_file(path, step: float) -> str:
        rows = [{"solver_name": "train", "dataset_name": "denoising_patches",
                 "objective_name": "supervised_training", "stop_val": s, "idx_rep": rep,
                 "time": s * step, "objective_forward_time_s": step / 2,
                 "objective_backward_time_s": step / 2, "objective_step_time_s": step,
                 "objective_throughput_pixels_per_s": 1000 / step,
                 "objective_step_peak_host_rss_mib": 500.0, "prov_config_hash": "7a",
                 "prov_world_size": 1, "prov_torch_threads": 2}
                for rep in range(3) for s in range(1, 4)]
        pd.DataFrame(rows).to_parquet(path)
        return str(path)

    base = training_file(tmp_path / "base.parquet", 1.0)
    slow = training_file(tmp_path / "slow.parquet", 2.0)
    assert main(["compare", base, slow, "--format", "json"]) == 1
    measures = {m["measure"]: m["verdict"]
                for m in json.loads(capsys.readouterr().out)["experiments"][0]["measures"]}
    assert measures == {"forward (s/iteration)": "slower", "backward (s/iteration)": "slower",
                        "step (s/iteration)": "slower", "iteration (s)": "slower",
                        "peak host memory (MiB)": "same", "throughput (pixels/s)": "slower"}
