"""The repository's benchopt benchmark folders and the objective each one runs.

Standard library only: the launcher picks a config's benchmark folder before any stack loads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scalebench.errors import ScalebenchError

REPO = Path(__file__).resolve().parents[1]
INFERENCE_BENCHMARK, INFERENCE_OBJECTIVE = "benchmark_inference", "imaging_inverse_problem"
TRAINING_BENCHMARK, TRAINING_OBJECTIVE = "benchmark_training", "supervised_training"
FOLDER_BY_OBJECTIVE = {INFERENCE_OBJECTIVE: REPO / INFERENCE_BENCHMARK,
                       TRAINING_OBJECTIVE: REPO / TRAINING_BENCHMARK}


def choose_benchmark(given: Path | None, named: str) -> Path:
    """The benchmark folder of a run: ``given`` (``--benchmark``), else the repository's folder
    ``named`` for the config's objective. A given folder that bears the name of the other
    repository benchmark is refused: its objective is not the one the config names."""
    if given is None:
        return REPO / (named or INFERENCE_BENCHMARK)
    given = given.resolve()
    known = {folder.name for folder in FOLDER_BY_OBJECTIVE.values()}
    if named and given.name in known and given.name != named:
        raise ScalebenchError(f"the config's objective is run by {named}, not by the "
                              f"--benchmark folder {given} (give {REPO / named} or leave "
                              f"--benchmark out; SLURM templates: SB_BENCHMARK)")
    return given


def config_objective(raw: Any) -> str:
    """The objective a parsed config names, spelt as its benchmark spells it.

    A config without an objective, or naming an unknown one, gets the inference objective:
    its validation then says what is wrong. Names match regardless of case, as in benchopt.
    """
    entries = raw.get("objective", []) if isinstance(raw, dict) else []
    for entry in entries if isinstance(entries, list) else [entries]:
        name = next(iter(entry), "") if isinstance(entry, dict) else str(entry)
        name = name.split("[")[0].strip().lower()
        if name in FOLDER_BY_OBJECTIVE:
            return name
    return INFERENCE_OBJECTIVE
