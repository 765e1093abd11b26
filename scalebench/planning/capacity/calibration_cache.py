"""The calibration cache: each calibration on disk, found again by its configuration's key.

A calibration is cached under ``<scalebench cache>/capacity/<configuration key>/`` (the key:
``configuration.configuration_key``), one JSON entry per set of probed sizes, refined ones
beside the first (``refine.refined_path``): a change to what the key covers finds no entry,
so the configuration calibrates again. Entries are written whole or not at all, and one that
cannot be read counts as none.
"""

from __future__ import annotations

import json
from pathlib import Path

from provenance.files import write_text_atomically
from scalebench.data.cache import cache_root
from scalebench.planning.capacity.configuration import (
    Configuration,
    configuration_key,
    family_key,
)
from scalebench.planning.capacity.model import CalibrationPoint, MemoryModel
from scalebench.planning.capacity.time_model import (
    RunPrediction,
    run_prediction,
    time_model,
)


def cache_path(configuration: Configuration, sizes: list[int], variant: str = "") -> Path:
    """``capacity/<configuration key>/<sizes><variant>.json`` in the scalebench cache; the
    first calibration has no ``variant``, a refined one names what it was refined for
    (refine.refined_path)."""
    return entries_folder(configuration) / f"{'-'.join(map(str, sorted(sizes)))}{variant}.json"


def entries_folder(configuration: Configuration) -> Path:
    """Where every calibration of ``configuration`` is kept, whatever its probed sizes."""
    return cache_root() / "capacity" / configuration_key(configuration)


def family_folder(configuration: Configuration) -> Path | None:
    """``capacity/families/<family key>/``: a note per configuration of the family calibrated
    whole (None: a configuration without a family)."""
    key = family_key(configuration)
    return None if key is None else cache_root() / "capacity" / "families" / key


def note_family_member(configuration: Configuration) -> None:
    """Note that ``configuration`` has calibrations of its own probes, for its family to share
    (``family_points``)."""
    folder = family_folder(configuration)
    if folder is not None:
        write_text_atomically(folder / f"{configuration_key(configuration)}.json",
                              json.dumps({"algorithm": configuration.algorithm}))


def family_points(configuration: Configuration, sizes: list[int]
                  ) -> tuple[CalibrationPoint, ...] | None:
    """The probes of another configuration of ``configuration``'s family calibrated whole at
    ``sizes`` (each marked with its algorithm, ``CalibrationPoint.shared_from``), None when
    there is none. A note or an entry that cannot be read counts as none."""
    from dataclasses import replace

    folder = family_folder(configuration)
    if folder is None:
        return None
    own = configuration_key(configuration)
    for note in sorted(folder.glob("*.json")):
        if note.stem == own:
            continue
        try:
            algorithm = str(json.loads(note.read_text())["algorithm"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        entry = read_entry(folder.parents[1] / note.stem /
                           f"{'-'.join(map(str, sorted(sizes)))}.json")
        if entry is not None and not any(point.shared_from for point in entry[0].points):
            return tuple(replace(point, shared_from=algorithm) for point in entry[0].points)
    return None


def read_entry(path: Path) -> tuple[MemoryModel, dict] | None:
    """A cache entry's model and its whole record (a refined one also holds its rounds);
    None when it cannot be read."""
    try:
        record = json.loads(path.read_text())
        return MemoryModel.from_json(record), record
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def write_entry(path: Path, record: dict) -> None:
    """``record`` at ``path``, whole or not at all (a parallel reader sees the old entry or
    the new one; two calibrations of one configuration each write through their own
    temporary file)."""
    write_text_atomically(path, json.dumps(record))


def cached_model(configuration: Configuration, sizes: list[int] | None = None
                 ) -> MemoryModel | None:
    """The cached calibration of ``configuration`` at ``sizes`` (None: of every cached one,
    the one whose probes reach the largest size, a refined one among them), None when there
    is none. An unreadable entry counts as none."""
    if sizes is not None:
        entry = read_entry(cache_path(configuration, sizes))
        return None if entry is None else entry[0]
    models = [entry[0] for entry in map(read_entry,
                                        sorted(entries_folder(configuration).glob("*.json")))
              if entry is not None]
    if not models:
        return None
    return max(models, key=lambda model: max((point.size for point in model.points),
                                             default=0))


def calibrated_peak(dataset: str, dataset_params: dict, solver: str, solver_params: dict,
                    ranks: int, size_parameter: str = "image_size") -> float | None:
    """One rank's peak as the cached calibration of this configuration predicts it; None
    without a calibration (``scalebench capacity`` makes them)."""
    from scalebench.problems import PROBLEMS

    if size_parameter not in PROBLEMS[dataset].params:
        return None
    configuration = Configuration(dataset, dataset_params, solver, solver_params,
                                  size_parameter)
    model = cached_model(configuration)
    if model is None:
        return None
    size = configuration.resolved_dataset()[size_parameter]
    return model.predict(configuration.sizes(size, ranks, model))


def calibrated_run(dataset: str, dataset_params: dict, solver: str, solver_params: dict,
                   ranks: int, size_parameter: str = "image_size") -> RunPrediction | None:
    """One run of this experiment on one of ``ranks`` ranks as the cached calibration of its
    configuration predicts it; None without a calibration whose probes were timed (never a
    guess: ``scalebench capacity`` makes them)."""
    from scalebench.problems import PROBLEMS

    if size_parameter not in PROBLEMS[dataset].params:
        return None
    configuration = Configuration(dataset, dataset_params, solver, solver_params,
                                  size_parameter)
    model = cached_model(configuration)
    timing = None if model is None else time_model(model.points)
    if timing is None:
        return None
    size = configuration.resolved_dataset()[size_parameter]
    return run_prediction(timing, configuration.time_counts(size, ranks),
                          *configuration.run_length())
