"""What replay checks: which rows form a run, whether they were tampered with, whether this
environment is the archived one, and whether a re-run's rows equal the archived ones (a
verdict per run). Re-running itself is ``scalebench.results.replay.rerun``.

A run is the set of rows sharing a config hash, a repetition index and a world size (one
experiment executed once, docs/glossary.md). Quality metrics and result digests are compared
at every iteration; timings and memory are measurements, not results, and are not compared.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from provenance import canonical_json, config_hash
from provenance.environment import RESULT_FIELDS
from provenance.schema import column
from scalebench.benchmarks import BENCHMARKS
from scalebench.errors import ScalebenchError
from scalebench.param_spec import (
    recorded_parameters,
    renamed_parameters,
    resolved_parameters,
)
from scalebench.rank.names import METRIC_NAMES, metric_column

COMPARED_METRICS = ("objective_value", *map(metric_column, METRIC_NAMES))
FORCE_RTOL = 1e-5
# The fields whose difference can change an estimate's bits (provenance.environment).
ENVIRONMENT = RESULT_FIELDS
REQUIRED = ("config_json", "config_hash", "result_sha256", *ENVIRONMENT)


@dataclass
class ArchivedRun:
    config: dict
    config_hash: str
    repetition: int
    rows: pd.DataFrame  # sorted by iteration

    @property
    def label(self) -> str:
        dataset, solver = self.config["dataset"], self.config["solver"]
        return f"{dataset['name']} x {solver['name']} (config {self.config_hash[:12]}, " \
               f"rep {self.repetition}, {world_size(self)} rank(s))"


def parse_rows(text: str | None, count: int) -> list[int] | None:
    """'0,3-5' -> [0, 3, 4, 5]; None means every row."""
    if text is None:
        return None
    rows = []
    try:
        for part in text.split(","):
            first, _, last = part.partition("-")
            rows.extend(range(int(first), int(last or first) + 1))
    except ValueError:
        raise ScalebenchError(f"--rows must look like '0,3-5', got {text!r}") from None
    outside = [r for r in rows if not 0 <= r < count]
    if outside:
        raise ScalebenchError(f"--rows: row {outside[0]} is outside 0-{count - 1}")
    return rows


def load_runs(df: pd.DataFrame, rows: list[int] | None) -> list[ArchivedRun]:
    missing = [column(f) for f in REQUIRED if column(f) not in df.columns]
    if missing:
        raise ScalebenchError(f"rows without provenance: column '{missing[0]}' is missing; "
                              f"replay needs results written by scalebench")
    selected = df if rows is None else df.iloc[rows]
    # The same config run on another number of ranks is another run.
    keys = selected[[column("config_hash"), "idx_rep", column("world_size")]].drop_duplicates()
    runs = []
    for stored_hash, repetition, ranks in keys.itertuples(index=False):
        group = df[(df[column("config_hash")] == stored_hash) & (df.idx_rep == repetition)
                   & (df[column("world_size")] == ranks)]
        config = json.loads(group[column("config_json")].iloc[0])
        runs.append(ArchivedRun(config, stored_hash, int(repetition),
                                      group.sort_values("stop_val")))
    return runs


def _same(stored, expected) -> bool:
    if isinstance(stored, float) and math.isnan(stored):
        return expected is None
    if isinstance(expected, bool) or isinstance(stored, bool | np.bool_):
        return bool(stored) == expected and isinstance(expected, bool)
    return stored == expected


def tampering(run: ArchivedRun) -> str | None:
    """Why the stored rows disagree with their hashed config, or None."""
    rows = run.rows
    if rows[column("config_json")].nunique() != 1:
        return "rows of one run carry different configs"
    if config_hash(rows[column("config_json")].iloc[0]) != run.config_hash:
        return "config hash mismatch: the stored config JSON does not hash to the stored hash"
    for part in ("dataset", "solver"):
        for key, expected in run.config[part]["params"].items():
            name = f"p_{part}_{key}"
            if name not in rows.columns:
                return f"config hash mismatch: parameter column '{name}' is missing"
            stored = rows[name].tolist()
            if not all(_same(value, expected) for value in stored):
                return (f"config hash mismatch: parameter '{name}' is {stored[0]!r} in the "
                        f"rows but {expected!r} in the hashed config")
    return None


def changed_environment(run: ArchivedRun, current: dict) -> list[str]:
    """What differs between the archived rows' environment and this one (empty: none).

    Uncommitted changes on either side are a difference unless both sides carry the same
    diff: the code that ran is then unknown.
    """
    archived = run.rows.iloc[0]
    threads = run.config["solver"]["params"].get("num_threads", 0)
    expected_here = {**current, "torch_threads": threads or current["torch_threads"]}
    differences = [f"{field} {expected_here[field]!r} here vs {archived[column(field)]!r} "
                   f"archived" for field in ENVIRONMENT
                   if str(expected_here[field]) != str(archived[column(field)])]
    if not differences:
        return []  # clean on both sides, or the same uncommitted changes on both
    dirty = [side for side, flag in (("here", expected_here["code_dirty"]),
                                     ("archived", bool(archived[column("code_dirty")])))
             if flag]
    if dirty:
        differences.append(f"uncommitted changes in the working tree ({' and '.join(dirty)})")
    return differences


def _ulp_distance(a: np.ndarray, b: np.ndarray) -> int:
    """Largest distance in units in the last place between float64 arrays (0 if equal)."""
    def ordered(x: np.ndarray) -> np.ndarray:
        bits = x.astype(np.float64).view(np.int64)
        return np.where(bits < 0, np.int64(-(2**63)) - bits, bits)
    return int(np.max(np.abs(ordered(a) - ordered(b)).astype(np.float64))) if a.size else 0


@dataclass(frozen=True)
class Difference:
    """Where two runs' rows of the same iterations first differ: the iteration and the column
    (a metric compared beyond the tolerance, else the result digest), with the largest
    absolute and ULP distances of the metrics."""

    iteration: int
    column: str
    max_abs: float
    max_ulp: int

    def text(self) -> str:
        return (f"first divergent iteration {self.iteration} ({self.column}), max abs diff "
                f"{self.max_abs:.3g}, max ULP {self.max_ulp}")


def first_difference(archived: pd.DataFrame, replayed: pd.DataFrame,
                     tolerance: float) -> Difference | None:
    """None when the rows of the same iterations (in the same order) agree (bit for bit, result
    digests included, if tolerance == 0), else their first difference."""
    first, worst_abs, worst_ulp = None, 0.0, 0
    for name in COMPARED_METRICS:
        if name not in archived or name not in replayed:  # written before the metric existed
            continue
        a = archived[name].to_numpy(np.float64)
        b = replayed[name].to_numpy(np.float64)
        close = np.isclose(a, b, rtol=tolerance, atol=0.0, equal_nan=True) if tolerance \
            else (a.view(np.int64) == b.view(np.int64))
        if not close.all():
            index = int(np.argmin(close))
            if first is None or index < first[0]:
                first = (index, name)
        finite = np.isfinite(a) & np.isfinite(b)
        worst_abs = max(worst_abs, float(np.max(np.abs(a - b)[finite], initial=0.0)))
        worst_ulp = max(worst_ulp, _ulp_distance(a[finite], b[finite]))
    digests = archived[column("result_sha256")].to_numpy() == \
        replayed[column("result_sha256")].to_numpy()
    if not tolerance and not digests.all():  # bit for bit: the estimates' digests too
        index = int(np.argmin(digests))
        if first is None or index < first[0]:
            first = (index, column("result_sha256"))
    if first is None:
        return None
    return Difference(int(archived.stop_val.iloc[first[0]]), first[1], worst_abs, worst_ulp)


def compare(archived: pd.DataFrame, replayed: pd.DataFrame, tolerance: float) -> str | None:
    """None when they agree (bit for bit if tolerance == 0), else what differs and where."""
    if archived.stop_val.tolist() != replayed.stop_val.tolist():
        return (f"iterations differ: {len(archived)} archived vs {len(replayed)} replayed "
                f"rows")
    found = first_difference(archived, replayed, tolerance)
    return None if found is None else found.text()


def world_size(run: ArchivedRun) -> int:
    return int(run.rows[column("world_size")].iloc[0])


@dataclass
class Verdict:
    """The outcome of replaying one run."""

    status: str  # MATCH, DIFFER, REFUSED or TAMPERED
    label: str
    detail: str

    @property
    def line(self) -> str:
        return f"{self.status} {self.label}: {self.detail}"


def current_form(config: dict) -> str:
    """A run's config as today's code reads it: old parameter names given their new ones
    and parameters added since filled with their defaults, for the components the
    registries know (a solver file of a benchmark folder is kept as archived). A run archived
    before a rename or a new parameter and its re-run then have one form."""
    benchmark = BENCHMARKS.get(config["objective"]["name"])
    specs = {"dataset": benchmark.problems if benchmark else {},
             "solver": benchmark.solvers if benchmark else {}}
    form = dict(config)
    for part in ("dataset", "solver"):
        name, params = config[part]["name"], config[part]["params"]
        if name in specs[part]:
            spec = specs[part][name]
            params = recorded_parameters(resolved_parameters(renamed_parameters(
                f"{part} '{name}'", params, spec.renamed), spec.params), spec.params)
        form[part] = {"name": name, "params": params}
    return canonical_json(form)


def verdict(run: ArchivedRun, differences: list[str],
             replayed: pd.DataFrame) -> Verdict:
    forms = replayed[column("config_json")].map(lambda text: current_form(json.loads(text)))
    mine = replayed[(forms == current_form(run.config))
                    & (replayed.idx_rep == run.repetition)
                    & (replayed[column("world_size")] == world_size(run))
                    ].sort_values("stop_val")
    tolerance = FORCE_RTOL if differences else 0.0
    if mine.empty:
        return Verdict("DIFFER", run.label, _why_no_rows(run, replayed))
    weights = weights_difference(run.rows, mine)
    if weights:
        return Verdict("DIFFER", run.label, weights)
    difference = compare(run.rows, mine, tolerance)
    exact = not tolerance or compare(run.rows, mine, 0.0) is None
    forced = f" (forced; environment differs: {'; '.join(differences)})" if tolerance else ""
    how = f"bit for bit{forced}" if exact else f"within rtol {tolerance:g}{forced}"
    if difference is None:
        return Verdict("MATCH", run.label, f"{len(mine)} iterations equal {how}")
    return Verdict("DIFFER", run.label, f"{difference}; compared {how}")


def weights_difference(archived: pd.DataFrame, replayed: pd.DataFrame) -> str | None:
    """What differs in the denoiser weights that ran, else None. The weights are resolved when
    the run starts (a hub or bundled file, a path, a seeded initialisation), so only the re-run
    can tell; results of other weights are not a replay, whatever the tolerance."""
    sha, label = column("weights_sha256"), column("weights")
    if sha not in archived:  # written before the weights fields existed
        return None
    before, after = (sorted(set(zip(rows[label], rows[sha], strict=True)))
                     for rows in (archived, replayed))
    if before == after:
        return None

    def described(pairs: list[tuple[str, str]]) -> str:
        return ", ".join(f"{name} sha256 {digest[:12] or '-'}" for name, digest in pairs)
    return (f"the denoiser weights that ran differ: {described(before)} archived vs "
            f"{described(after)} now")


def _why_no_rows(run: ArchivedRun, replayed: pd.DataFrame) -> str:
    """Why the re-run produced no row of the run's config hash."""
    solver = run.config["solver"]
    same_solver = replayed[replayed.solver_name.str.split("[").str[0] == solver["name"]]
    if same_solver.empty:
        return f"the re-run produced no rows of solver '{solver['name']}'"
    config = json.loads(same_solver[column("config_json")].iloc[0])
    archived, now = run.config, config
    changes = []
    for part in ("dataset", "solver"):
        before, after = archived[part]["params"], now[part]["params"]
        changes += [f"{part} parameter '{key}' added (now {after[key]!r})"
                    for key in sorted(set(after) - set(before))]
        changes += [f"{part} parameter '{key}' removed" for key in sorted(set(before) - set(after))]
        changes += [f"{part} parameter '{key}' {before[key]!r} archived vs {after[key]!r} now"
                    for key in sorted(set(before) & set(after)) if before[key] != after[key]]
    reason = "; ".join(changes) or "its canonical config differs"
    return (f"the re-run produced no rows with config hash {run.config_hash[:12]}: "
            f"this code resolves the archived config differently ({reason}), so the archive "
            f"comes from another version of the benchmark")
