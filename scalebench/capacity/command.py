"""``scalebench capacity CONFIG --memory BUDGET``: the largest size of each configuration of an
experiment grid whose predicted per-rank peak fits the budget."""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from scalebench.capacity.calibration import (
    Configuration,
    calibrate,
    largest_fitting,
    probe_point,
    probe_sizes,
)
from scalebench.capacity.model import MemoryModel
from scalebench.errors import ScalebenchError

UNITS = {"": 1, "B": 1, "K": 2**10, "KIB": 2**10, "M": 2**20, "MIB": 2**20, "G": 2**30,
         "GIB": 2**30, "T": 2**40, "TIB": 2**40}


def parse_bytes(text: str) -> int:
    """'80GiB', '80G', '512MiB', '1.5TiB' as bytes; anything else is a one-line error."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if not match or match.group(2).upper() not in UNITS or float(match.group(1)) <= 0:
        raise ScalebenchError(f"--memory {text!r} is not a memory size: give a positive "
                              f"number with a unit, e.g. 80GiB, 512MiB, 16G")
    return int(float(match.group(1)) * UNITS[match.group(2).upper()])


def gib(value: float) -> str:
    return f"{value / 2**30:.2f} GiB"


@dataclass(frozen=True)
class CapacityLine:
    """The answer for one configuration on ``ranks`` ranks."""

    label: str
    ranks: int
    size_parameter: str
    largest_size: int | None
    predicted_peak_bytes: float | None
    dominant_term: str | None
    terms: dict
    calibration_sizes: list[int]
    cached: bool
    measured_peak_bytes: int | None = None
    reason: str = ""  # why there is no largest size

    def to_json(self) -> dict:
        return dict(self.__dict__)

    def text(self) -> str:
        who = "1 rank" if self.ranks == 1 else f"with {self.ranks} ranks"
        calibrated = f"calibrated at {', '.join(map(str, self.calibration_sizes))}" + \
            (", cached" if self.cached else "")
        if self.largest_size is None:
            return f"{self.label}  {who}: {self.reason} ({calibrated})"
        line = (f"{self.label}  {who}: up to {self.size_parameter} {self.largest_size}, "
                f"predicted {gib(self.predicted_peak_bytes)} per rank, dominated by "
                f"{self.dominant_term} ({calibrated})")
        if self.measured_peak_bytes is not None:
            ratio = self.predicted_peak_bytes / self.measured_peak_bytes
            line += (f"\n    verified: measured {gib(self.measured_peak_bytes)}, predicted/"
                     f"measured {ratio:.3f}")
        return line


def configurations(config: Path, nproc: int, size_parameter: str,
                   device: str | None) -> list[tuple[Configuration, str, int]]:
    """(configuration, label, ranks) of every experiment of ``config``, those that differ
    only by the size once."""
    from scalebench.benchmarks import INFERENCE_OBJECTIVE, config_objective
    from scalebench.config import read_yaml
    from scalebench.launch.runner import experiment_ranks
    from scalebench.launch.steps import component_label, expand
    from scalebench.problems import PROBLEMS

    objective = config_objective(read_yaml(config, "config"))
    if objective != INFERENCE_OBJECTIVE:
        raise ScalebenchError(f"scalebench capacity covers the inference benchmark's "
                              f"experiments ({INFERENCE_OBJECTIVE}), not {objective}")
    with tempfile.TemporaryDirectory(prefix="scalebench-capacity-") as scratch:
        experiments = expand(config, nproc, Path(scratch))
    found, seen = [], set()
    for experiment in experiments:
        (dataset, dataset_params), = experiment["dataset"].items()
        (solver, solver_params), = experiment["solver"].items()
        spec = PROBLEMS[dataset]
        if size_parameter not in spec.params or spec.params[size_parameter].kind is not int:
            sizes = [name for name, param in spec.params.items() if param.kind is int]
            raise ScalebenchError(f"dataset '{dataset}' has no size parameter "
                                  f"'{size_parameter}' (its integer parameters: "
                                  f"{', '.join(sizes) or 'none'}); choose one with "
                                  f"--size-parameter")
        if device is not None:
            solver_params = {**solver_params, "device": device}
        configuration = Configuration(dataset, dataset_params, solver, solver_params,
                                      size_parameter)
        ranks = experiment_ranks(experiment, nproc)
        key = (json.dumps(configuration.key_record(), sort_keys=True, default=str), ranks)
        if key in seen:
            continue
        seen.add(key)
        label = f"{component_label(dataset, configuration.without_size()['dataset_params'])}" \
                f" x {component_label(solver, solver_params)}"
        found.append((configuration, label, ranks))
    return found


def grows(configuration: Configuration, model: MemoryModel, ranks: int) -> bool:
    """Whether the fitted model's peak grows with the size: a model whose size terms all
    fitted to zero would call every size fitting."""
    first, last = model.points[0].size, model.points[-1].size
    return model.predict(configuration.sizes(last, ranks, model)) > \
        model.predict(configuration.sizes(first, ranks, model))


def answer(configuration: Configuration, label: str, ranks: int, budget: int,
           model: MemoryModel, cached: bool) -> CapacityLine:
    if budget < model.baseline_bytes:
        raise ScalebenchError(f"the budget {gib(budget)} is below the process baseline "
                              f"{gib(model.baseline_bytes)} measured for {label}")
    sizes = [point.size for point in model.points]
    if not grows(configuration, model, ranks):
        return CapacityLine(label, ranks, configuration.size_parameter, None, None, None, {},
                            sizes, cached, reason=(
                                f"no answer: the probed peaks do not grow with "
                                f"{configuration.size_parameter}; calibrate at larger sizes "
                                f"(--calibration-size)"))
    size = largest_fitting(configuration, model, ranks, budget)
    if size is None:
        return CapacityLine(label, ranks, configuration.size_parameter, None, None, None, {},
                            sizes, cached, reason="no size fits")
    counts = configuration.sizes(size, ranks, model)
    return CapacityLine(label, ranks, configuration.size_parameter, size,
                        model.predict(counts), model.dominant(counts), model.terms(counts),
                        sizes, cached)


def capacity(config: Path, budget: int, nproc: int, size_parameter: str, device: str | None,
             largest_probe: int, verify: bool) -> list[CapacityLine]:
    """One line per configuration and rank count of ``config``; ``verify``: the largest
    predicted size of each one-rank line run once, its peak measured."""
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise ScalebenchError("--device cuda: no CUDA device here (give --device cpu for "
                                  "host memory)")
    lines = []
    for configuration, label, ranks in configurations(config, nproc, size_parameter, device):
        sizes = probe_sizes(configuration, largest_probe)
        if len(sizes) < 3:
            raise ScalebenchError(f"{label}: fewer than three valid {size_parameter} values "
                                  f"up to {largest_probe} to calibrate at (give a larger "
                                  f"--calibration-size)")
        model, cached = calibrate(configuration, sizes)
        line = answer(configuration, label, ranks, budget, model, cached)
        if verify and ranks == 1 and line.largest_size is not None:
            measured = probe_point(configuration, line.largest_size).peak_bytes
            line = replace(line, measured_peak_bytes=measured)
        lines.append(line)
    return lines
