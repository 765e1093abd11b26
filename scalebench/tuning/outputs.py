"""What a tuning leaves beside its trials: one results parquet of every trial's rows (with
the trial's study, number and state, and full provenance), and the tuned config, in the format
of the config it came from, each method at its best setting and stamped with the study it
came from, scored on the problem's test images.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import yaml

from provenance.results import read_table
from provenance.stop_reasons import RECORD_KEY
from scalebench.problems import PROBLEMS
from scalebench.results.store import run_status, write_results
from scalebench.tuning.search import Search
from scalebench.tuning.trials import CPU_ATTRIBUTE, RESULTS_ATTRIBUTE

# The scalebench key of a tuned config: how each method's setting was found.
TUNED_KEY = "tuned"


def merge_results(final: Path, studies: list[tuple[Search, Any]], trials: Path,
                  config: Path) -> int:
    """Every trial's rows of ``studies`` ((search, optuna study)) in one results file,
    ``final``; its run status names every experiment and how it stopped. Each row gains the
    columns of scalebench.results.columns.TUNING_COLUMNS. Returns the rows."""
    tables, experiments, stops = [], [], {}
    for search, study in studies:
        for trial in study.get_trials(deepcopy=False):
            name = trial.user_attrs.get(RESULTS_ATTRIBUTE)
            if not name or not (trials / name).is_file():
                continue
            table = read_table(trials / name)
            record = run_status(trials / name)
            experiments += record.get("experiments", [])
            stops.update(record.get(RECORD_KEY, {}))
            size = table.num_rows
            for column, value in (("tune_study", search.key), ("tune_trial", trial.number),
                                  ("tune_state", trial.state.name.lower()),
                                  ("tune_cpu_s", trial.user_attrs.get(CPU_ATTRIBUTE))):
                table = table.append_column(column, pa.array([value] * size))
            tables.append(table.replace_schema_metadata(None))
    if not tables:
        return 0
    status = {"status": "complete", "experiments": experiments, "failures": [],
              "config": str(config), RECORD_KEY: stops}
    return write_results(pa.concat_tables(tables, promote_options="permissive"), status,
                         final)


def tuned_config(raw: dict, studies: list[tuple[Search, Any]], results: Path) -> dict:
    """``raw`` (the config tuned) with each tuned method at its best setting, on the test
    images of its problem, and the ``tuned`` record of where each setting came from."""
    datasets = {search.dataset[0]: search.dataset for search, _ in studies}
    dataset_entries = []
    for name, params in datasets.values():
        family = PROBLEMS[name].images
        test = [family.parameters(image)[family.parameter] for image in family.split("test")]
        dataset_entries.append({name: {**params, family.parameter: test}})
    untuned = [entry for entry in raw.get("solver", [])
               if _solver_name(entry) not in {search.solver[0] for search, _ in studies}]
    solvers, record = list(untuned), {}
    for search, study in studies:
        best = study.best_trial
        solvers.append({search.solver[0]: {**search.solver[1], **best.params}})
        record[search.key] = {"method": search.label, "value": best.value,
                              "trial": best.number, "setting": best.params,
                              "trials": len(study.get_trials(deepcopy=False)),
                              "validation": list(search.images), "results": results.name}
    options = {key: value for key, value in raw.items()
               if key not in ("dataset", "solver", "tune", TUNED_KEY)}
    return {**options, "dataset": dataset_entries, "solver": solvers, TUNED_KEY: record}


def _solver_name(entry: Any) -> str:
    if isinstance(entry, dict):
        return str(next(iter(entry)))
    return str(entry).split("[", 1)[0]


def write_tuned_config(path: Path, config: dict, source: Path) -> None:
    header = (f"# Tuned by `scalebench tune {source}`: each method at the setting of its "
              f"study's best trial on the\n# validation images; scored here on the test "
              f"images (a validation image is refused).\n")
    path.write_text(header + yaml.safe_dump(config, sort_keys=False))
