"""The time side of a capacity answer: the time model's predictions at a size, its curve and
probes for the report, the budgets a question may give, and what a verification measured."""

from __future__ import annotations

from scalebench.errors import ScalebenchError
from scalebench.planning.capacity.calibration import (
    largest_fitting,
    largest_valid,
    usable_budget,
)
from scalebench.planning.capacity.configuration import Configuration, valid_at_most
from scalebench.planning.capacity.model import MemoryModel
from scalebench.planning.capacity.time_model import (
    TimeModel,
    duration_text,
    step_time,
    time_model,
    timed,
)


def run_seconds(configuration: Configuration, timing: TimeModel, size: int,
                ranks: int) -> float:
    """The predicted seconds of one run at ``size`` on ``ranks`` ranks (its ``max_iter``
    iterations and evaluations, the operator norm computed)."""
    return timing.run_seconds(configuration.time_counts(size, ranks),
                              *configuration.run_length())


def time_fields(configuration: Configuration, timing: TimeModel | None, ranks: int,
                size: int | None, sizes: list[int]) -> dict:
    """The line's time model, its probes, its curve at ``sizes`` and its predictions at the
    answer ``size`` (none without a model or an answer)."""
    if timing is None:
        return {}
    iterations, evaluations = configuration.run_length()
    fields = {"time_model": timing.to_json(), "iterations": iterations,
              "time_margin": timing.held_out_error, "one_probe_terms": timing.one_probe_terms(),
              "evaluations": evaluations,
              "time_curve": [[value, run_seconds(configuration, timing, value, ranks),
                              timing.iteration_seconds(configuration.time_counts(value, ranks))]
                             for value in sizes]}
    if size is None:
        return fields
    counts = configuration.time_counts(size, ranks)
    return {**fields, "predicted_iteration_s": timing.iteration_seconds(counts),
            "predicted_setup_s": timing.setup_seconds(counts),
            "predicted_run_s": timing.run_seconds(counts, iterations, evaluations),
            "step_seconds": timing.step_seconds(counts),
            "time_extrapolation": timing.extrapolation(counts)}


def time_probes(model: MemoryModel) -> list[list]:
    """[size, seconds per iteration, set-up seconds] of each timed probe of the configuration
    itself: one borrowed from another algorithm of its family (calibration.shared_points)
    timed that algorithm's steps."""
    return [[point.size, measured_iteration(point.timing), point.timing["setup_s"]]
            for point in timed(model.points) if not point.shared_from]


def measured_iteration(timing: dict) -> float:
    """A probe's seconds per iteration: its steps' (time_model.step_time) together."""
    return sum(step_time(timing, name) for name in timing["steps"])


def check_budgets(budget: int | None, time_budget_s: float | None, quick: bool) -> None:
    """A budget is given, and a time budget is positive and not with ``quick``; else a
    one-line error."""
    if budget is None and time_budget_s is None:
        raise ScalebenchError("scalebench capacity needs a budget: --memory, --time or both")
    if time_budget_s is not None and time_budget_s <= 0:
        raise ScalebenchError(f"--time must be a positive duration, got {time_budget_s:g} s")
    if time_budget_s is not None and quick:
        raise ScalebenchError("--time with --quick: a time budget is answered from probes "
                              "near the answer, which --quick skips; drop --quick")


def check_cached_timing(configuration: Configuration, sizes: list[int], label: str,
                        time_budget_s: float | None) -> None:
    """Before any probe: a cached calibration whose probes were not timed cannot answer a
    time budget (a one-line error)."""
    from scalebench.planning.capacity.calibration_cache import cached_model

    if time_budget_s is None:
        return
    model = cached_model(configuration, sizes)
    if model is not None and time_model(model.points) is None:
        raise ScalebenchError(f"{label}: --time needs a time-calibrated configuration, and "
                              f"its cached calibration's probes were not timed (remove its "
                              f"cache entries to calibrate it again)")


def machine_budget(configuration: Configuration) -> int:
    """The memory budget of a time-only question: what this machine has for a run."""
    from scalebench.planning.capacity.refine import machine_bytes

    available = machine_bytes(configuration.device)
    if available is None:
        raise ScalebenchError("--time alone: this machine's memory is unknown; give "
                              "--memory too")
    return available


def within_budgets(configuration: Configuration, model: MemoryModel, timing: TimeModel | None,
                   ranks: int, budget: int, time_budget_s: float | None
                   ) -> tuple[int | None, str | None, str]:
    """The largest size within the memory budget (with its headroom) and, given one, whose
    predicted run with the model's held-out error over it (TimeModel.held_out_error) fits
    ``time_budget_s``; which budget binds (None without a time budget);
    and why there is none, if there is none."""
    size = largest_fitting(configuration, model, ranks, usable_budget(model, budget))
    if time_budget_s is None:
        return size, None, "no size fits"
    if size is None:
        return None, "memory", "no size fits the memory budget"
    margin = 1.0 + timing.held_out_error  # the model's held-out error, kept under the budget
    timed_size = largest_valid(configuration, lambda value: run_seconds(
        configuration, timing, value, ranks) * margin <= time_budget_s)
    if timed_size is None:
        smallest = valid_at_most(configuration, min(point.size for point in model.points))
        shortest = "" if smallest is None else (
            f" (the smallest probed, {configuration.size_parameter} {smallest}, is predicted "
            f"at {duration_text(run_seconds(configuration, timing, smallest, ranks))})")
        return None, "time", f"no size runs within the time budget{shortest}"
    if timed_size < size:
        return timed_size, "time", ""
    return size, "memory", ""
