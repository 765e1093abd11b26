"""``scalebench compare --exact``: the experiments whose inputs are equal on both sides must
give equal estimates, bit for bit, on every iteration both sides ran.

The inputs are ``EXACT_INPUTS``: what can change an estimate's bits other than the code (the
config, the data, the image, the threads, the ranks, the device and deterministic mode); the
code commit may differ, which is what ``--exact`` guards against. The rows are compared by the
replay's rule (``replay.checks.first_difference``: the metrics and the result digests), which
names the first iteration that differs. Imports no torch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

from provenance.environment import value_text
from provenance.schema import column
from scalebench.results.replay.checks import first_difference

# Equal on both sides: equal estimates expected. The device is the CPU and the GPU models (a
# config's device, cpu or cuda, is in its hash; the instruction set follows the CPU model).
EXACT_INPUTS = ("config_hash", "data_sha256", "image_digest", "torch_threads", "world_size",
                "cpu_model", "gpu_models", "deterministic_mode")
EQUAL, DIFFER, SKIPPED = "equal", "differ", "skipped"


@dataclass(frozen=True)
class ExactCheck:
    """The outcome of ``--exact`` for one experiment: EQUAL, DIFFER or SKIPPED, and why."""

    status: str
    detail: str

    @property
    def line(self) -> str:
        return f"{self.status}: {self.detail}"

    def to_json(self) -> dict:
        return asdict(self)


def differing_input(base: pd.DataFrame, candidate: pd.DataFrame) -> str | None:
    """The first of EXACT_INPUTS whose values differ between the sides' rows of one
    experiment, with both ('torch_threads 2 -> 1'); None when all are equal."""
    for field in EXACT_INPUTS:
        values = [", ".join(sorted({value_text(v) for v in rows[column(field)]}))
                  if column(field) in rows else "" for rows in (base, candidate)]
        if values[0] != values[1]:
            return f"{field} {values[0] or '-'} -> {values[1] or '-'}"
    return None


def exact_check(base: pd.DataFrame, candidate: pd.DataFrame,
                run_keys: tuple[str, ...] = ("idx_rep",)) -> ExactCheck:
    """Whether one experiment's estimates are equal bit for bit on both sides (``base``,
    ``candidate``: its rows), run by run (``run_keys``: the columns of a run, its repetition
    and image) on the iterations both ran."""
    differing = differing_input(base, candidate)
    if differing:
        return ExactCheck(SKIPPED, f"inputs differ: {differing}")
    if column("result_sha256") not in base or column("result_sha256") not in candidate:
        return ExactCheck(SKIPPED, f"{column('result_sha256')} not recorded")
    keys = [key for key in run_keys if key in base and key in candidate]
    first, compared = None, 0
    for run, left in base.groupby(keys, sort=False, dropna=False):
        right = candidate[_matching(candidate, keys, run)]
        common = set(left["stop_val"]) & set(right["stop_val"])
        left, right = (rows[rows["stop_val"].isin(common)].sort_values("stop_val")
                       for rows in (left, right))
        if left.empty or len(left) != len(right):
            continue
        compared += len(left)
        found = first_difference(left.reset_index(drop=True), right.reset_index(drop=True),
                                 0.0)
        if found is not None and (first is None or found.iteration < first[1].iteration):
            first = (_run_text(keys, run), found)
    if first is not None:
        return ExactCheck(DIFFER, f"{first[1].text()} ({first[0]})")
    if not compared:
        return ExactCheck(SKIPPED, "no common iteration")
    return ExactCheck(EQUAL, f"{compared} common iteration(s) equal bit for bit")


def _matching(rows: pd.DataFrame, keys: list[str], run: tuple) -> pd.Series:
    found = pd.Series(True, index=rows.index)
    for key, value in zip(keys, run, strict=True):
        found &= rows[key].isna() if pd.isna(value) else rows[key] == value
    return found


def _run_text(keys: list[str], run: tuple) -> str:
    return ", ".join(f"{'repetition' if key == 'idx_rep' else 'image'} {value}"
                     for key, value in zip(keys, run, strict=True) if not pd.isna(value))
