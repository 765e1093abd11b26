"""The common target of the report's time-to-quality view, on synthetic runs whose solver
times are sums of binary-exact step times."""

from __future__ import annotations

import math

import pandas as pd

from scalebench.results.report.data import RUN
from scalebench.results.report.methods import method_names, time_to_target


def _run(name: str, psnr: list[float], steps: list[float]) -> pd.DataFrame:
    """One run's rows: iteration k at the sum of the first k step times."""
    times = [sum(steps[:k]) for k in range(len(psnr))]
    return pd.DataFrame({RUN: name, "stop_val": range(len(psnr)), "time": times,
                         "objective_psnr_db": psnr})


def test_each_run_reaches_the_target_half_a_db_below_the_best_of_any_run():
    rows = pd.concat([
        _run("fast", [10.0, 28.0, 29.5, 30.0], [0.25, 0.5, 0.125]),   # exactly the target at 2
        _run("slow", [10.0, 20.0, 29.25, 29.75, 29.0], [1.0, 2.0, 0.5, 0.75]),
        _run("short", [10.0, 29.25], [0.5]),                           # never within 0.5 dB
        _run("diverged", [10.0, float("nan")], [0.5]),
    ], ignore_index=True)
    target = time_to_target(rows, "objective_psnr_db")
    assert target.value == 29.5
    assert target.runs.loc["fast"].tolist() == [30.0, 2, 0.25 + 0.5]
    assert target.runs.loc["slow"].tolist() == [29.75, 3, 1.0 + 2.0 + 0.5]
    for run, best in (("short", 29.25), ("diverged", 10.0)):
        found = target.runs.loc[run]
        assert found["best"] == best and math.isnan(found["iterations"]) \
            and math.isnan(found["seconds"])


def test_a_method_is_the_solver_with_its_algorithm_and_denoiser_where_recorded():
    rows = pd.DataFrame({"solver_name": ["pnp[algorithm=fista,denoiser=tv]", "fbp[filter=hann]",
                                         "pnp[algorithm=pgd,denoiser=dncnn]", "fbp[filter=ram-lak]",
                                         "cgls[max_iter=9]"],
                         "p_solver_algorithm": ["fista", None, "pgd", None, None],
                         "p_solver_denoiser": ["tv", None, "dncnn", None, None],
                         "p_solver_filter": [None, "hann", None, "ram-lak", None]})
    assert method_names(rows).tolist() == ["pnp algorithm=fista denoiser=tv", "fbp filter=hann",
                                           "pnp algorithm=pgd denoiser=dncnn",
                                           "fbp filter=ram-lak", "cgls"]
    older = rows.drop(columns="p_solver_algorithm")  # rows written before that parameter
    assert method_names(older).tolist()[:3] == ["pnp denoiser=tv", "fbp filter=hann",
                                                "pnp denoiser=dncnn"]
