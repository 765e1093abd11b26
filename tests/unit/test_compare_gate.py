"""`scalebench compare` as a gate: a single run judged by its factor, quality in dB, a quality
target no longer reached, an experiment cut by its time limit, and --exact's bit-for-bit
identity, on rules and on written results files (exit 1 where the gate fails)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from provenance.stop_reasons import COMPLETE, TIME_LIMIT, Stop
from scalebench.cli import main
from scalebench.results.compare_rules import (
    CUT_ON_BOTH,
    DB,
    DEFAULT_FACTOR,
    DEFAULT_QUALITY_DB,
    HIGHER,
    LOWER,
    SAME,
    UNKNOWN,
    Measure,
    Thresholds,
    cut_verdict,
    quality_db,
    single_run,
    verdict,
)
from scalebench.statistics import summary

TIME = Measure("iteration (s)", "time", LOWER)
MEMORY = Measure("peak host memory (MiB)", "memory", LOWER)
THROUGHPUT = Measure("throughput (pixels/s)", "throughput", HIGHER)
PSNR = Measure("final PSNR", "quality", HIGHER, DB)
SSIM = Measure("final SSIM", "quality", HIGHER)
TARGET = Measure("seconds to the common PSNR target", "time", LOWER, target=True)
RULES = Thresholds(tolerance=0.05, factor=1.5, quality_db=0.1)
NAN = float("nan")


# --- the rules ----------------------------------------------------------------------------

def test_a_single_run_is_judged_by_the_ratio_of_medians_against_the_factor():
    one = summary([1.0])
    assert single_run(one, summary([1.0, 1.1, 1.2])) and not single_run(*[summary([1, 2])] * 2)
    assert verdict(TIME, one, summary([1.49]), RULES) == SAME  # within 1.5x
    assert verdict(TIME, one, summary([1.51]), RULES) == "slower"
    assert verdict(TIME, one, summary([0.6]), RULES) == "faster"  # 1/0.6 = 1.67x
    assert verdict(TIME, one, summary([0.7]), RULES) == SAME
    assert verdict(TIME, one, summary([2.2, 2.3, 2.4]), RULES) == "slower"  # one run a side
    assert verdict(MEMORY, summary([100.0]), summary([160.0]), RULES) == "larger"
    assert verdict(THROUGHPUT, summary([100.0]), summary([50.0]), RULES) == "slower"
    assert verdict(TIME, one, summary([1.2]), Thresholds(factor=1.1)) == "slower"  # asv's


def test_two_or_more_repetitions_keep_the_spread_rule_not_the_factor():
    """2x beyond both spreads is slower at any factor; 1.3x within a spread is the same."""
    assert verdict(TIME, summary([1.0, 1.01]), summary([2.0, 2.01]),
                   Thresholds(tolerance=0.05, factor=3.0)) == "slower"
    assert verdict(TIME, summary([1.0, 1.4]), summary([1.3, 1.3]), RULES) == SAME


def test_with_repetitions_the_tolerance_is_a_ratio_either_way_beyond_the_spreads():
    """Tolerance 0.8: 1.8x slower and 1.8x faster are the same distance; within it, or within
    a side's spread, the same."""
    rules = Thresholds(tolerance=0.8)
    base = summary([1.0, 1.0, 1.01])
    assert verdict(TIME, base, summary([1.85, 1.86, 1.87]), rules) == "slower"
    assert verdict(TIME, base, summary([1.75, 1.76, 1.77]), rules) == SAME
    assert verdict(TIME, base, summary([0.54, 0.545, 0.55]), rules) == "faster"  # 1/0.55
    assert verdict(TIME, base, summary([0.57, 0.575, 0.58]), rules) == SAME  # 1/0.57 < 1.8
    # beyond the ratio but within the candidate's spread: the same
    assert verdict(TIME, base, summary([1.0, 1.9, 3.0]), rules) == SAME


def test_the_defaults_separate_the_measured_drift_from_a_shared_core():
    """docs/performance.md, "Compare as a gate": identical campaigns up to 1.65x apart, a
    core shared with a busy loop at least 2.08x slower, at 1 and at 3 repetitions."""
    rules = Thresholds()
    for repetitions in (1, 3):
        base = summary([1.0] * repetitions)
        assert verdict(TIME, base, summary([1.65] * repetitions), rules) == SAME
        assert verdict(TIME, base, summary([1 / 1.65] * repetitions), rules) == SAME
        assert verdict(TIME, base, summary([2.08] * repetitions), rules) == "slower"


def test_quality_in_db_is_compared_in_absolute_db_whatever_the_repetitions():
    for repetitions in (1, 3):
        base = summary([16.7] * repetitions)
        assert verdict(PSNR, base, summary([16.4] * repetitions), RULES) == "worse"
        assert verdict(PSNR, base, summary([16.65] * repetitions), RULES) == SAME
        assert verdict(PSNR, base, summary([17.0] * repetitions), RULES) == "better"
    # 5 % of 16.7 dB is 0.8 dB: a relative tolerance would call a 0.3 dB drop the same
    assert verdict(PSNR, summary([16.7] * 3), summary([16.4] * 3), Thresholds(0.05)) == "worse"
    assert verdict(PSNR, summary([16.7] * 3), summary([16.4] * 3),
                   Thresholds(quality_db=0.5)) == SAME
    # with repetitions, beyond the spread too
    assert verdict(PSNR, summary([16.0, 16.7]), summary([16.4, 16.4]), RULES) == SAME


def test_quality_not_in_db_keeps_the_relative_tolerance():
    assert verdict(SSIM, summary([0.80]), summary([0.78]), RULES) == SAME  # 2.5 % < 5 %
    assert verdict(SSIM, summary([0.80]), summary([0.70]), RULES) == "worse"


def test_a_target_every_base_repetition_reaches_and_no_candidate_one_does_is_slower():
    for repetitions in (1, 3):
        reached, never = summary([2.0] * repetitions), summary([NAN] * repetitions)
        assert verdict(TARGET, reached, never, RULES) == "slower"
        assert verdict(TARGET, never, reached, RULES) == "faster"
    some = summary([2.0, NAN, 2.1])  # one candidate repetition reaches it: unknown
    assert verdict(TARGET, summary([2.0, 2.0, 2.0]), some, RULES) == UNKNOWN
    assert verdict(TIME, summary([2.0] * 3), summary([NAN] * 3), RULES) == UNKNOWN  # no target


def test_a_cut_side_is_worse_where_the_other_completed():
    complete, cut = Stop(COMPLETE, 4, 4), Stop(TIME_LIMIT, 1, 4)
    assert cut_verdict(complete, complete) is None
    assert cut_verdict(complete, cut) == "worse"
    assert cut_verdict(cut, complete) == "better"
    assert cut_verdict(cut, cut) == CUT_ON_BOTH


def test_the_quality_tolerance_is_written_with_its_unit():
    assert quality_db("0.1dB") == quality_db("0.1 dB") == quality_db(".1DB") == 0.1
    assert quality_db(f"{DEFAULT_QUALITY_DB}dB") == DEFAULT_QUALITY_DB
    for text in ("0.1", "0.1 %", "-0.1dB", "dB", "0.1 dB dB"):
        with pytest.raises(ValueError, match="written with its unit"):
            quality_db(text)


def test_thresholds_name_what_is_wrong():
    assert Thresholds().problem() is None and Thresholds(factor=1.0).problem() is None
    assert "--factor" in Thresholds(factor=0.99).problem()
    assert "--factor" in Thresholds(factor=NAN).problem()
    assert "--tolerance" in Thresholds(tolerance=-0.1).problem()
    assert "--quality-tolerance" in Thresholds(quality_db=-1.0).problem()


# --- written results files ----------------------------------------------------------------

def rows(repetitions: int = 1, seconds: float = 1.0, psnr: float = 20.0, threads: int = 1,
         config: str = "c0ffee", data: str = "data", differ_from: int | None = None,
         stop_at: int | None = None, commit: str = "aaa") -> pd.DataFrame:
    """One CT experiment's rows: 4 iterations of ``seconds`` each, PSNR rising 1 dB per
    iteration from ``psnr``; digests that differ from iteration ``differ_from`` on; cut by its
    time limit at iteration ``stop_at``."""
    found = []
    for rep in range(repetitions):
        for iteration in range(4 if stop_at is None else stop_at + 1):
            tag = "x" if differ_from is not None and iteration >= differ_from else ""
            found.append({
                "solver_name": "pnp[denoiser=tv]", "dataset_name": "tomography_2d[image_size=32]",
                "objective_name": "imaging", "stop_val": iteration, "idx_rep": rep,
                "time": iteration * seconds, "objective_psnr_db": psnr + iteration,
                "objective_grad_time_s": seconds * (1 + 0.01 * rep),
                "objective_grad_peak_host_rss_mib": 100.0, "p_solver_max_iter": 4,
                "objective_stop_reason": COMPLETE if stop_at is None else TIME_LIMIT,
                "objective_stop_iteration": 3 if stop_at is None else stop_at,
                "prov_config_hash": config, "prov_world_size": 1,
                "prov_torch_threads": threads, "prov_hostname": "vm",
                "prov_image_digest": "none", "prov_data_sha256": data,
                "prov_cpu_model": "cpu", "prov_gpu_models": "none",
                "prov_deterministic_mode": True, "prov_code_commit": commit,
                "prov_result_sha256": f"{config}{rep}{iteration}{tag}"})
    return pd.DataFrame(found)


def write(path, *frames: pd.DataFrame) -> str:
    pd.concat(frames, ignore_index=True).to_parquet(path)
    return str(path)


def judged(tmp_path, base: pd.DataFrame, candidate: pd.DataFrame, *options: str, capsys
           ) -> tuple[int, dict]:
    """compare's exit status and JSON document for two files of these rows."""
    status = main(["compare", write(tmp_path / "base.parquet", base),
                   write(tmp_path / "candidate.parquet", candidate), "--format", "json",
                   *options])
    return status, json.loads(capsys.readouterr().out)


def verdicts(found: dict) -> dict[str, str]:
    experiment, = found["experiments"]
    return {m["measure"]: m["verdict"] for m in experiment["measures"]}


def test_one_run_a_side_2x_slower_is_slower_single_run_exit_1(tmp_path, capsys):
    status, found = judged(tmp_path, rows(), rows(seconds=2.2), capsys=capsys)
    assert status == 1 and found["factor"] == DEFAULT_FACTOR
    grad, = [m for m in found["experiments"][0]["measures"]
             if m["measure"] == "grad (s/iteration)"]
    assert grad["verdict"] == "slower" and grad["single_run"]
    assert main(["compare", str(tmp_path / "base.parquet"),
                 str(tmp_path / "candidate.parquet")]) == 1
    assert "slower (single run)" in capsys.readouterr().out
    status, found = judged(tmp_path, rows(), rows(seconds=1.2), capsys=capsys)
    assert status == 0 and verdicts(found)["grad (s/iteration)"] == "same"
    status, _ = judged(tmp_path, rows(), rows(seconds=1.2), "--factor", "1.1", capsys=capsys)
    assert status == 1


@pytest.mark.parametrize("repetitions", [1, 3])
def test_a_psnr_0_3_db_lower_is_worse_and_0_05_db_lower_the_same(tmp_path, capsys,
                                                                 repetitions):
    base = rows(repetitions, psnr=16.7)
    status, found = judged(tmp_path, base, rows(repetitions, psnr=16.4), capsys=capsys)
    assert verdicts(found)["best PSNR"] == verdicts(found)["final PSNR"] == "worse"
    assert status == 1 and found["quality_tolerance_db"] == 0.1
    status, found = judged(tmp_path, base, rows(repetitions, psnr=16.65), capsys=capsys)
    assert verdicts(found)["best PSNR"] == verdicts(found)["final PSNR"] == "same"
    assert status == 0
    status, found = judged(tmp_path, base, rows(repetitions, psnr=16.4),
                           "--quality-tolerance", "0.5dB", capsys=capsys)
    assert verdicts(found)["final PSNR"] == "same"


def test_a_target_no_candidate_run_reaches_is_slower_exit_1(tmp_path, capsys):
    """The target is 0.5 dB below the best either side reached (23 dB): the candidate's best
    is 21 dB."""
    target = "seconds to the common PSNR target"
    status, found = judged(tmp_path, rows(3), rows(3, psnr=18.0), capsys=capsys)
    assert verdicts(found)[target] == "slower" and status == 1
    status, found = judged(tmp_path, rows(3, psnr=18.0), rows(3), capsys=capsys)
    assert verdicts(found)[target] == "faster" and status == 0


def test_a_candidate_cut_by_its_time_limit_is_worse_not_compared_as_complete(tmp_path,
                                                                            capsys):
    status, found = judged(tmp_path, rows(), rows(stop_at=1), capsys=capsys)
    experiment, = found["experiments"]
    assert status == 1 and experiment["cut"] == "worse" and found["regressions"] == 1
    assert set(verdicts(found).values()) == {"cut"}  # its faster iterations judge nothing
    status, found = judged(tmp_path, rows(stop_at=1), rows(), capsys=capsys)
    assert status == 0 and found["experiments"][0]["cut"] == "better"
    main(["compare", str(tmp_path / "candidate.parquet"), str(tmp_path / "base.parquet")])
    text = capsys.readouterr().out
    assert "stopped early: base complete at iteration 3 of 4; candidate time limit at " \
           "iteration 1 of 4 (not compared as complete: worse)" in text


def test_without_exact_a_bit_difference_never_changes_the_exit(tmp_path, capsys):
    status, found = judged(tmp_path, rows(), rows(differ_from=2), capsys=capsys)
    assert status == 0 and found["experiments"][0]["bit_for_bit"] == "differ (2 of 4 rows)"
    assert found["experiments"][0]["exact"] is None


def test_exact_equal_inputs_on_another_commit_must_be_equal_bit_for_bit(tmp_path, capsys):
    status, found = judged(tmp_path, rows(3), rows(3, commit="bbb"), "--exact", capsys=capsys)
    assert status == 0 and found["differences"] == {"code_commit": ["aaa", "bbb"]}
    assert found["experiments"][0]["exact"] == {
        "status": "equal", "detail": "12 common iteration(s) equal bit for bit"}
    status, found = judged(tmp_path, rows(3), rows(3, commit="bbb", differ_from=2), "--exact",
                           capsys=capsys)
    assert status == 1 and found["exact_differences"] == 1 and found["regressions"] == 0
    detail = found["experiments"][0]["exact"]["detail"]
    assert detail.startswith("first divergent iteration 2 (prov_result_sha256)"), detail
    main(["compare", str(tmp_path / "base.parquet"), str(tmp_path / "candidate.parquet"),
          "--exact"])
    assert "--exact: 1 of 1 experiment(s) differ bit for bit" in capsys.readouterr().out


def test_exact_compares_the_common_iterations_and_names_the_first_that_differs(tmp_path,
                                                                              capsys):
    """The candidate's run is longer (another max-runs): iterations 0-3 are compared."""
    longer = pd.concat([rows(differ_from=1), rows(differ_from=1).assign(stop_val=lambda f:
                                                                          f.stop_val + 4)])
    status, found = judged(tmp_path, rows(), longer, "--exact", capsys=capsys)
    assert status == 1
    assert "first divergent iteration 1 " in found["experiments"][0]["exact"]["detail"]


def test_exact_lists_and_skips_experiments_whose_inputs_differ(tmp_path, capsys):
    base = pd.concat([rows(), rows(config="beef")])
    candidate = pd.concat([rows(commit="bbb"), rows(config="beef", data="other")])
    status, found = judged(tmp_path, base, candidate, "--exact", capsys=capsys)
    assert status == 0
    checks = [e["exact"] for e in found["experiments"]]
    assert checks[0]["status"] == "equal"
    assert checks[1] == {"status": "skipped", "detail": "inputs differ: data_sha256 data -> "
                                                        "other"}
