"""``scalebench compare BASE CANDIDATE``: the same experiments in two environments, measure by
measure, with their spread and a verdict, and the environment fields that differ.

Experiments are matched by config hash and world size; a configuration that both sides ran on
several images is matched by its config without the image (``report.over_images``), its
images then the samples (``--per-image``: image by image, as experiments). Per run (one
repetition) each measure is one figure (``run_measures``), per image the mean over its
repetitions where a side ran several images; per side, the median over the samples and the
range from the lowest to the highest, judged by ``compare_rules`` (the spread rule, a single
run's factor, quality in dB). An experiment cut on a side (its time limit, a diverged estimate,
pruned) is never judged as if complete: its measures are not compared, and the experiment is
worse where only the candidate was cut. ``exact``: experiments of equal inputs must be equal
bit for bit (``compare_exact``); without it a bit difference is shown, never judged. The
experiments a side's run status names failed or stopped (no rows to compare) are listed.
Imports no torch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from provenance.environment import (
    ENVIRONMENT_FIELDS,
    SHOWN_FIELDS,
    differing_fields,
    value_text,
)
from provenance.results import UnreadableResults
from provenance.schema import column
from provenance.stop_reasons import COMPLETE, FAILED, STOPPED, Stop, record_stops
from scalebench.errors import ScalebenchError
from scalebench.results.compare_exact import DIFFER, SKIPPED, ExactCheck, exact_check
from scalebench.results.compare_rules import (
    CUT,
    WORSE,
    Thresholds,
    cut_verdict,
    is_regression,
    single_run,
    verdict,
)
from scalebench.results.report.data import (
    RUN,
    experiment_key,
    headline_metric,
    load_results,
    run_labels,
)
from scalebench.results.report.measures import run_measures
from scalebench.results.report.over_images import image_columns, images_of, without_image_key
from scalebench.results.stops import stop_of
from scalebench.results.store import run_status
from scalebench.statistics import summary

DEFAULTS = Thresholds()
IMAGE = "_image"  # column added here: the image a row's run ran on (None: no image family)


@dataclass
class Experiment:
    name: str
    repetitions: tuple[int, int]
    measures: list[dict]
    bitwise: str  # whether the estimates are equal bit for bit
    largest_metric_difference: float | None  # headline metric, over iterations and reps
    metric: str = ""
    stops: tuple[Stop, Stop] = (Stop(COMPLETE), Stop(COMPLETE))  # base, candidate
    images: tuple[int, int] = (1, 1)  # base, candidate: several, the samples are images
    exact: ExactCheck | None = None  # --exact's outcome; None without --exact

    @property
    def cut(self) -> str | None:
        """The verdict of a side cut before its max_iter (compare_rules.cut_verdict)."""
        return cut_verdict(*self.stops)

    @property
    def regressions(self) -> int:
        """Measures judged worse, and a candidate cut where the base completed."""
        return sum(m["regression"] for m in self.measures) + (self.cut == WORSE)


@dataclass
class Comparison:
    base: Path
    candidate: Path
    thresholds: Thresholds
    differences: dict[str, list[str]]  # environment field -> [base, candidate]
    shown: dict[str, list[str]]  # hosts and jobs: shown, no part of the environment
    experiments: list[Experiment] = field(default_factory=list)
    only_base: list[str] = field(default_factory=list)
    only_candidate: list[str] = field(default_factory=list)
    # side -> the experiments its run status names failed or stopped, with how
    unfinished: dict[str, list[str]] = field(default_factory=dict)

    @property
    def regressions(self) -> int:
        return sum(e.regressions for e in self.experiments)

    @property
    def exact_differences(self) -> list[Experiment]:
        """The experiments --exact found unequal bit for bit."""
        return [e for e in self.experiments if e.exact and e.exact.status == DIFFER]

    @property
    def failed(self) -> bool:
        """Whether the gate fails (exit 1): a regression, or an --exact difference."""
        return bool(self.regressions or self.exact_differences)

    def to_json(self) -> dict:
        return {"base": str(self.base), "candidate": str(self.candidate),
                "tolerance": self.thresholds.tolerance, "factor": self.thresholds.factor,
                "quality_tolerance_db": self.thresholds.quality_db,
                "differences": self.differences, "shown": self.shown,
                "experiments": [{"experiment": e.name, "repetitions": list(e.repetitions),
                                 "images": list(e.images),
                                 "bit_for_bit": e.bitwise,
                                 "exact": e.exact.to_json() if e.exact else None,
                                 "largest_metric_difference": e.largest_metric_difference,
                                 "metric": e.metric, "measures": e.measures,
                                 "cut": e.cut,
                                 "stops": {"base": e.stops[0].to_json(),
                                           "candidate": e.stops[1].to_json()}}
                                for e in self.experiments],
                "only_in_base": self.only_base, "only_in_candidate": self.only_candidate,
                "unfinished": self.unfinished,
                "regressions": self.regressions,
                "exact_differences": len(self.exact_differences)}


def _side_values(rows: pd.DataFrame) -> str:
    return ", ".join(sorted({value_text(v) for v in rows})) if len(rows) else ""


def environment_differences(base: pd.DataFrame, candidate: pd.DataFrame,
                            fields) -> dict[str, list[str]]:
    """Fields whose values differ between the two sides: field -> [base, candidate] (each the
    side's distinct values, comma-separated)."""
    sides = [{column(f): _side_values(frame[column(f)]) if column(f) in frame else ""
              for f in fields} for frame in (base, candidate)]
    return differing_fields(sides, fields)


def _paired(base: pd.DataFrame, candidate: pd.DataFrame, name: str) -> pd.DataFrame:
    """Column ``name`` of both sides on their common repetitions and iterations (``name``_x:
    the base's, ``name``_y: the candidate's)."""
    keys = ["idx_rep", "stop_val", *([IMAGE] if IMAGE in base and IMAGE in candidate else [])]
    return base[keys + [name]].merge(candidate[keys + [name]], on=keys)


def _bitwise(base: pd.DataFrame, candidate: pd.DataFrame) -> str:
    digest = column("result_sha256")
    if digest not in base or digest not in candidate:
        return "not recorded"
    joined = _paired(base, candidate, digest)
    if joined.empty:
        return "no common iteration"
    equal = int((joined[f"{digest}_x"] == joined[f"{digest}_y"]).sum())
    return "equal" if equal == len(joined) else f"differ ({len(joined) - equal} of " \
        f"{len(joined)} rows)"


def _metric_difference(base: pd.DataFrame, candidate: pd.DataFrame,
                       metric: str) -> float | None:
    if metric not in base or metric not in candidate:
        return None
    joined = _paired(base, candidate, metric)
    difference = (joined[f"{metric}_x"] - joined[f"{metric}_y"]).abs()
    return float(difference.max()) if difference.notna().any() else None


def compare_experiment(name: str, base: pd.DataFrame, candidate: pd.DataFrame,
                       thresholds: Thresholds, exact: bool = False) -> Experiment:
    """Every measure of one experiment on both sides (``base``, ``candidate``: its rows); the
    measures of an experiment cut on a side are shown, not judged."""
    stops = (stop_of(base), stop_of(candidate))
    check = exact_check(base, candidate, ("idx_rep", IMAGE)) if exact else None
    # The same run in the same environment on both sides is still two runs here.
    base, candidate = (frame.assign(**{RUN: side + frame[RUN]})
                       for side, frame in (("base:", base), ("candidate:", candidate)))
    measures, values = run_measures(pd.concat([base, candidate], ignore_index=True))
    sides = [values.loc[list(dict.fromkeys(frame[RUN]))] for frame in (base, candidate)]
    images = [frame.groupby(RUN, sort=False)[IMAGE].first().fillna("") for frame in
              (base, candidate)]
    counts = tuple(int(side.nunique()) for side in images)
    repetitions = tuple(len(side) // count for side, count in zip(sides, counts, strict=True))
    if max(counts) > 1:  # an image is a sample: its mean over its repetitions
        sides = [side.groupby(image.loc[side.index], sort=False).mean()
                 for side, image in zip(sides, images, strict=True)]
    cut = cut_verdict(*stops) is not None
    found = []
    for measure in measures:
        left, right = (summary(side[measure.name].tolist()) for side in sides)
        word = CUT if cut else verdict(measure, left, right, thresholds)
        found.append({"measure": measure.name, "base": _number(left.median),
                      "base_spread": _number(left.spread),
                      "candidate": _number(right.median),
                      "candidate_spread": _number(right.spread),
                      "ratio": _number(right.median / left.median
                                       if left.median and right.median is not None else None),
                      "unit": measure.unit,
                      "verdict": word, "single_run": single_run(left, right),
                      "regression": is_regression(measure, word)})
    metric, label = headline_metric(base["dataset_name"].iloc[0])
    return Experiment(name, repetitions, found, _bitwise(base, candidate),
                      _metric_difference(base, candidate, metric), label, stops, counts, check)


def _number(value) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def _load(path: Path):
    results = load_results([path])
    if column("config_hash") not in results.rows:
        raise UnreadableResults(f"{path}: not a scalebench results file (no provenance column "
                                f"{column('config_hash')})")
    rows = results.rows
    rows["_experiment"], rows[IMAGE] = experiment_key(rows), images_of(rows)
    rows["_without_image"] = without_image_key(rows)
    return results


def _several_images(rows: pd.DataFrame) -> set[str]:
    """The configurations (without their image) that ``rows`` ran on several images."""
    counts = rows.groupby("_without_image")[IMAGE].nunique(dropna=False)
    return set(counts.index[counts > 1])


def _match_over_images(left, right) -> set[str]:
    """Match the configurations both sides ran on several images by the config without its
    image: their rows' experiment becomes that key. Returns the keys so matched."""
    both = _several_images(left.rows) & _several_images(right.rows)
    for side in (left, right):
        over = side.rows["_without_image"].isin(both)
        side.rows.loc[over, "_experiment"] = side.rows.loc[over, "_without_image"]
    return both


def check_inputs(base: Path, candidate: Path, thresholds: Thresholds) -> None:
    problem = thresholds.problem()
    if problem:
        raise ScalebenchError(problem)
    for path in (base, candidate):
        if not path.is_file():
            raise UnreadableResults(f"{path}: no such file")
    if os.path.samefile(base, candidate):
        raise ScalebenchError(f"{candidate} is {base} itself: compare a file with another "
                              f"results file")


def compare(base: Path, candidate: Path, thresholds: Thresholds = DEFAULTS,
            per_image: bool = False, exact: bool = False) -> Comparison:
    """The comparison of two results files (bad input raises ScalebenchError or
    UnreadableResults, naming the file); ``per_image``: image by image, never over images;
    ``exact``: experiments of equal inputs must be equal bit for bit."""
    check_inputs(base, candidate, thresholds)
    left, right = _load(base), _load(candidate)
    over = set() if per_image else _match_over_images(left, right)
    names = {}
    for side in (right, left):
        rows = side.rows
        names.update(run_labels(rows, ("idx_rep",)))
        aggregated = rows[rows["_without_image"].isin(over)]
        if not aggregated.empty:
            names.update(run_labels(aggregated, ("idx_rep", *image_columns(aggregated))))
    keys = [dict.fromkeys(side.rows["_experiment"]) for side in (left, right)]
    common = [k for k in keys[0] if k in keys[1]]
    if not common:
        raise ScalebenchError(f"{base} and {candidate} share no experiment (same config hash "
                              f"and world size): nothing to compare")
    matched = [side.rows[side.rows["_experiment"].isin(common)] for side in (left, right)]
    comparison = Comparison(base, candidate, thresholds,
                            environment_differences(*matched, ENVIRONMENT_FIELDS),
                            environment_differences(*matched, SHOWN_FIELDS))

    def name(side, key: str) -> str:
        return names[side.rows.loc[side.rows["_experiment"] == key, RUN].iloc[0]]

    for key in common:
        rows = [side.rows[side.rows["_experiment"] == key] for side in (left, right)]
        comparison.experiments.append(compare_experiment(name(left, key), *rows, thresholds,
                                                         exact))
    if exact:
        check_exact_matches(comparison)
    comparison.only_base = [name(left, k) for k in keys[0] if k not in keys[1]]
    comparison.only_candidate = [name(right, k) for k in keys[1] if k not in keys[0]]
    comparison.unfinished = {side: unfinished_experiments(path)
                             for side, path in (("base", base), ("candidate", candidate))}
    return comparison


def check_exact_matches(comparison: Comparison) -> None:
    """--exact with no experiment of matching inputs on both sides is bad input: a
    ScalebenchError naming the first experiment's differing input."""
    checks = [e.exact for e in comparison.experiments if e.exact]
    if checks and all(check.status == SKIPPED for check in checks):
        raise ScalebenchError(f"--exact: {comparison.base} and {comparison.candidate} share no "
                              f"experiment with matching inputs ({checks[0].detail}; they "
                              f"must share config hash, data digest, image digest, torch "
                              f"threads, world size, device and deterministic mode)")


def unfinished_experiments(path: Path) -> list[str]:
    """The experiments the run status of ``path`` names failed or stopped (they kept no
    rows): '<label>: failed at iteration 2 of 4'."""
    record = run_status(path)
    labels = {f.get("experiment"): f.get("label") for f in record.get("failures", [])}
    return [f"{labels.get(key) or key}: {stop.text()}"
            for key, stop in record_stops(record).items() if stop.reason in (FAILED, STOPPED)]
