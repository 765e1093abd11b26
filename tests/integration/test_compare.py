"""docs/comparing.md's commands run for real, in a clone of the repository: the same CT config
on every core and under ``taskset -c 0``, then ``scalebench compare`` and ``scalebench report``
on the two files; the commit before against the current one. The host-against-image block
runs where its image is built (tests/system/test_containers.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

import pandas as pd
import pytest

from tests.support.cli import run_cli
from tests.support.comparing_page import (
    OUTPUTS,
    PAGE,
    PODMAN_BLOCK_TEST,
    clone,
    default_threads_env,
    page_blocks,
    run_block,
    shell,
)
from tests.support.paths import REPO


@pytest.fixture(scope="module")
def page_run(tmp_path_factory):
    if shutil.which("taskset") is None:
        pytest.skip("taskset is not installed")
    copy = clone(tmp_path_factory.mktemp("comparing"))
    env = shell(copy)
    return copy, {name: run_block(name, copy, env) for name in ("cores", "commits")}


def test_the_page_has_the_three_comparisons():
    """Two run here; the podman block runs where its image is built."""
    assert set(page_blocks()) == {"cores", "podman", "commits"}
    path, name = PODMAN_BLOCK_TEST.split("::")
    assert f"def {name}(" in (REPO / path).read_text()


def test_two_core_counts_differ_in_threads_only(page_run):
    copy, done = page_run
    text = done["cores"][2].stdout
    assert re.search(r"environment fields that differ \(base -> candidate\):\n"
                     r"  torch_threads: 1 -> \d+\n\n", text), text
    found = json.loads((copy / OUTPUTS / "comparison.json").read_text())
    assert list(found["differences"]) == ["torch_threads"]
    experiment, = found["experiments"]
    assert experiment["repetitions"] == [3, 3]
    verdicts = {m["measure"]: m["verdict"] for m in experiment["measures"]}
    assert {"grad (s/iteration)", "denoise (s/iteration)", "iteration (s)",
            "peak host memory (MiB)", "best PSNR", "final PSNR"} <= set(verdicts)
    assert set(verdicts.values()) <= {"faster", "slower", "same", "smaller", "larger",
                                      "better", "worse"}
    assert found["regressions"] == sum(m["regression"] for m in experiment["measures"])
    assert done["cores"][2].returncode == (1 if found["regressions"] else 0)


def test_the_report_keeps_both_core_counts_labelled_by_threads(page_run):
    copy, done = page_run
    summary = done["cores"][4].stdout
    assert "6 run(s) from 2 file(s)" in summary and "0 duplicate(s) dropped" in summary
    assert "environments" in summary.split("figures:")[1]
    page = (copy / OUTPUTS / "environments.html").read_text()
    assert "threads=1" in page and re.search(r"threads=[2-9]", page)
    assert "Environments: the same experiment in each environment" in page


def test_two_commits_differ_in_the_commit(page_run):
    copy, done = page_run
    text = done["commits"][-1].stdout
    commits = subprocess.run(["git", "rev-parse", "HEAD~1", "HEAD"], cwd=copy,
                             capture_output=True, text=True, check=True).stdout.split()
    assert f"code_commit: {commits[0]} -> {commits[1]}" in text
    rows = pd.read_parquet(copy / OUTPUTS / "after.parquet")
    assert set(rows["prov_code_commit"]) == {commits[1]}


def test_bad_input_from_the_command_line_is_one_line_and_exit_2(page_run, tmp_path):
    copy, _ = page_run
    results = copy / OUTPUTS
    cases = [([results / "one_core.parquet", results / "one_core.parquet"], "itself"),
             ([results / "one_core.parquet", PAGE], "not a readable parquet file"),
             ([results / "one_core.parquet", results / "all_cores.parquet", "--tolerance",
               "0"], "--tolerance must be a fraction in (0, 1)")]
    for arguments, message in cases:
        done = run_cli("compare", *arguments, cwd=tmp_path)
        assert done.returncode == 2 and done.stdout == "", done.stderr
        assert done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_measurement_tool_prints_threads_and_why_podman_is_missing(tmp_path):
    """tools/compare_environments.py on a tiny CT: the tables docs/performance.md records."""
    if shutil.which("taskset") is None:
        pytest.skip("taskset is not installed")
    done = subprocess.run([sys.executable, "-m", "tools.compare_environments", "--size", "32",
                           "--angles", "12", "--iterations", "2", "--folder", str(tmp_path)],
                          cwd=REPO, env=default_threads_env(), capture_output=True, text=True,
                          timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "differing fields: torch_threads: 1 -> " in done.stdout
    assert re.search(r"\| grad \(s/iteration\) \| .* \| (faster|slower|same) \|", done.stdout)
    assert "### host against the podman image" in done.stdout
    # no --image given: not measured either way, saying why
    reason = "podman is not installed here" if shutil.which("podman") is None \
        else "no --image given"
    assert f"not measured: {reason}" in done.stdout


def test_the_gate_check_prints_every_pair_its_exit_and_the_psnr_check(tmp_path):
    """tools/compare_check.py at a tiny size and one repetition (its timings are noise there:
    the targets on timings are the full-size run's, docs/performance.md; the several
    repetitions' spread rule runs the same pairs, tests/unit/test_compare_gate.py); the PSNR
    check holds at any size."""
    if shutil.which("taskset") is None or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs taskset and two cores")
    done = subprocess.run([sys.executable, "-m", "tools.compare_check", "--size", "16",
                           "--angles", "8", "--iterations", "1", "--experiments", "1",
                           "--campaigns", "2", "--repetitions", "1", "--factors", "1.5",
                           "--folder", str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=1200, check=False)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    rows = re.findall(r"\| (identical|slowed) \| r1_identical_\d \| "
                      r"r1_(?:identical|slowed)_\d \| [^|]+ \| ([01]) \|", done.stdout)
    assert sorted(kind for kind, _ in rows) == ["identical"] * 2 + ["slowed"] * 4, rows
    assert re.search(r"1 repetition\(s\): slowed pairs 'slower', exit 1: \d of 4",
                     done.stdout)
    assert re.search(r"\| 1\.5 \| \d of 2 \| \d of 4 \|", done.stdout), done.stdout
    assert "met: PSNR 0.3 dB lower: worse: best PSNR 1 worse; final PSNR 1 worse" in done.stdout
    assert "met: PSNR 0.05 dB lower: same: best PSNR 1 same; final PSNR 1 same" in done.stdout
    assert (done.returncode == 1) == ("MISSED: " in done.stdout)
