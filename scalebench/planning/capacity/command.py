"""``scalebench capacity CONFIG --memory BUDGET --time DURATION``: the largest size of each
configuration of an experiment grid whose predicted per-rank peak fits the memory budget and
whose predicted run (set-up, ``max_iter`` iterations, evaluations) fits the time budget."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from scalebench.errors import ScalebenchError
from scalebench.planning.capacity.calibration import (
    calibrate,
    probe_point,
    probe_sizes,
)
from scalebench.planning.capacity.configuration import Configuration, valid_at_most
from scalebench.planning.capacity.experiments import configurations
from scalebench.planning.capacity.model import CalibrationPoint, MemoryModel
from scalebench.planning.capacity.refine import (
    OVERRUN_ROUNDS,
    Refined,
    Round,
    refined,
    with_overrun,
)
from scalebench.planning.capacity.time_answer import (
    check_budgets,
    check_cached_timing,
    machine_budget,
    measured_iteration,
    time_fields,
    time_probes,
    within_budgets,
)
from scalebench.planning.capacity.time_laws import ONE_PROBE
from scalebench.planning.capacity.time_model import (
    COMMUNICATION_NOT_INCLUDED,
    duration_text,
    leaves_out_communication,
    time_model,
)
from scalebench.rank.devices import cuda_available


def gib(value: float) -> str:
    return f"{value / 2**30:.2f} GiB"


@dataclass(frozen=True)
class CapacityLine:
    """The answer for one configuration on ``ranks`` ranks, with what the report's capacity
    view draws: the probes, the model's curve and the budget."""

    label: str
    ranks: int
    size_parameter: str
    largest_size: int | None
    predicted_peak_bytes: float | None
    dominant_term: str | None
    dominant_phase: str | None  # model.PHASES: the phase whose peak is the run's
    terms: dict  # bytes of each term of the dominant phase
    calibration_sizes: list[int]
    cached: bool
    budget_bytes: int
    baseline_bytes: float  # the model's peak as the size goes to nothing
    floor_bytes: float  # MemoryModel.floor_bytes: the headroom's base
    device: str  # 'cpu' (host memory) or 'cuda' (the caching allocator's reserved memory)
    configuration: dict  # Configuration.key_record(): every parameter but the size
    probes: list[list]  # [size, measured peak bytes, chunks cut (workspace probe)]
    curve: list[list]  # [size, predicted peak bytes] on ``ranks`` ranks
    measured_peak_bytes: int | None = None
    # Verifications whose peak exceeded the budget, each then a refinement round
    # (refine.with_overrun, Round.overrun) before the one reported; kept with the cache.
    overrun_rounds: int = 0
    reason: str = ""  # why there is no largest size
    # MemoryModel.approximate: the iterations' terms were fitted to peaks the set-up's hid (no
    # resettable host peak here), so their growth past the probes is not known.
    approximate: bool = False
    quick: bool = False  # the first calibration only (--quick): a bound far from its probes
    refinement: list = field(default_factory=list)  # refine.Round.to_json() of each round
    # The largest probe's unknowns over the answer's: how far the model extrapolates.
    probe_fraction: float | None = None
    calibration_seconds: float = 0.0  # wall time of the probes, when they ran
    # The algorithms whose probes the calibration borrowed (calibration.shared_points), and
    # how many probes it borrowed: none where it probed every size itself.
    shared_with: list = field(default_factory=list)
    shared_probes: int = 0
    # The time model (time_model.TimeModel.to_json(); None: the calibration has no timings)
    # and its predictions at the answer for the run's ``iterations`` and ``evaluations``.
    time_model: dict | None = None
    time_budget_s: float | None = None
    binding: str | None = None  # which budget sets the answer: 'memory' or 'time'
    iterations: int = 0
    evaluations: int = 0
    predicted_iteration_s: float | None = None
    predicted_setup_s: float | None = None
    predicted_run_s: float | None = None
    step_seconds: dict = field(default_factory=dict)  # each step's predicted seconds
    time_extrapolation: float | None = None  # times the largest probe's count (1: within)
    time_probes: list = field(default_factory=list)  # [size, iteration s, set-up s] measured
    # [size, predicted run s, predicted s per iteration] on ``ranks`` ranks
    time_curve: list = field(default_factory=list)
    measured_iteration_s: float | None = None
    measured_setup_s: float | None = None
    # The time model's held-out error (TimeModel.held_out_error): the margin an answer to
    # --time keeps under its budget; and its terms measured at one count (not a fit).
    time_margin: float | None = None
    one_probe_terms: list = field(default_factory=list)

    @property
    def verified_ratio(self) -> float | None:
        """Predicted over measured peak at the largest size (--verify)."""
        if self.measured_peak_bytes is None or self.predicted_peak_bytes is None:
            return None
        return self.predicted_peak_bytes / self.measured_peak_bytes

    @property
    def time_ratios(self) -> tuple[float, float] | None:
        """Predicted over measured seconds per iteration and set-up at the answer
        (--verify)."""
        if self.measured_iteration_s is None or self.predicted_iteration_s is None:
            return None
        return (self.predicted_iteration_s / self.measured_iteration_s,
                self.predicted_setup_s / self.measured_setup_s)

    def to_json(self) -> dict:
        ratios = self.time_ratios
        return {**self.__dict__, "verified_ratio": self.verified_ratio,
                "verified_time_ratios": None if ratios is None else
                {"iteration": ratios[0], "setup": ratios[1]}}

    def time_text(self) -> str:
        """The predicted run at the answer, which budget binds, and its verification."""
        if self.time_model is None:
            return "\n    time: not calibrated (its probes were not timed)"
        if self.predicted_run_s is None:
            return ""
        steps = ", ".join(f"{name} {seconds:.3g} s" for name, seconds
                          in self.step_seconds.items())
        line = (f"\n    time: predicted {self.predicted_iteration_s:.3g} s per iteration "
                f"({steps}), set-up {duration_text(self.predicted_setup_s)}, "
                f"{self.iterations} iterations and {self.evaluations} evaluations in "
                f"{duration_text(self.predicted_run_s)}")
        if self.time_budget_s is not None:
            line += (f"; {self.binding} binds (time budget {duration_text(self.time_budget_s)}),"
                     f" a {self.time_margin or 0:.0%} margin kept under it for the model's "
                     f"held-out error")
        if self.time_extrapolation and self.time_extrapolation > 1.05:
            line += f"; extrapolates {self.time_extrapolation:.2g}x past the largest probe"
        if self.one_probe_terms:
            line += f"; {ONE_PROBE}: {', '.join(self.one_probe_terms)}"
        if leaves_out_communication(self.ranks):
            line += f"; {COMMUNICATION_NOT_INCLUDED}"
        ratios = self.time_ratios
        if ratios is not None:
            line += (f"\n    verified time: per iteration predicted "
                     f"{self.predicted_iteration_s:.3g} s, measured "
                     f"{self.measured_iteration_s:.3g} s, ratio {ratios[0]:.3f}; set-up "
                     f"predicted {self.predicted_setup_s:.3g} s, measured "
                     f"{self.measured_setup_s:.3g} s, ratio {ratios[1]:.3f}")
        return line

    def calibration_text(self) -> str:
        """Where it was calibrated, how (quick or refined), how far its largest probe is from
        the answer and how long the probes took."""
        text = f"calibrated at {', '.join(map(str, self.calibration_sizes))}"
        if self.largest_size is not None:
            how = "quick" if self.quick else \
                f"refined in {len(self.refinement)} round{'s' * (len(self.refinement) != 1)}"
            text += f"; {how}, largest probe at {self.probe_fraction:.2g} of its unknowns"
        text += f"; calibration {duration_text(self.calibration_seconds)}"
        if self.shared_probes:
            text += (f", {self.shared_probes} of its {len(self.probes)} probes shared with "
                     f"{', '.join(self.shared_with)}")
        return text + (", cached" if self.cached else "")

    def text(self) -> str:
        who = "1 rank" if self.ranks == 1 else f"with {self.ranks} ranks"
        calibrated = self.calibration_text()
        if self.largest_size is None:
            return f"{self.label}  {who}: {self.reason} ({calibrated})"
        line = (f"{self.label}  {who}: up to {self.size_parameter} {self.largest_size}"
                f"{'' if self.binding is None else f' ({self.binding} binds)'}, "
                f"predicted {gib(self.predicted_peak_bytes)} per rank, dominated by "
                f"{self.dominant_term} in the {self.dominant_phase} ({calibrated})")
        if self.verified_ratio is not None:
            line += (f"\n    verified: predicted {gib(self.predicted_peak_bytes)}, measured "
                     f"{gib(self.measured_peak_bytes)}, predicted/measured "
                     f"{self.verified_ratio:.3f}")
            if self.measured_peak_bytes > self.budget_bytes:
                line += f", over the budget {gib(self.budget_bytes)}"
            if self.overrun_rounds:
                line += (f" (after {self.overrun_rounds} answer{'s' * (self.overrun_rounds > 1)}"
                         f" over the budget, each run then a probe)")
        if self.approximate:
            line += ("\n    approximate: this system lets no process reset its peak memory "
                     "(/proc/self/clear_refs), and the set-up's peak hid the iterations' at "
                     "probed sizes")
        return line + self.time_text()


# Sizes of the model's curve (the report's capacity view), spaced evenly on a log axis.
CURVE_POINTS = 40


def curve(configuration: Configuration, model: MemoryModel, ranks: int,
          largest: int | None) -> list[list]:
    """[size, predicted peak] from the smallest probe to half again past the largest fitting
    size (or four times the largest probe), at valid sizes."""
    low = min(point.size for point in model.points)
    high = max(largest or 0, 4 * max(point.size for point in model.points)) * 3 // 2
    sizes = sorted({valid_at_most(configuration, round(low * (high / low) ** (k / (
        CURVE_POINTS - 1)))) for k in range(CURVE_POINTS)} - {None})
    return [[size, model.predict(configuration.sizes(size, ranks, model))] for size in sizes]


def answer(configuration: Configuration, label: str, ranks: int, budget: int,
           model: MemoryModel, cached: bool, rounds: list[Round] | None = None,
           time_budget_s: float | None = None) -> CapacityLine:
    """The line of ``model`` within ``budget`` (and, given ``time_budget_s``, whose predicted
    run fits it too); ``rounds``: its refinement (None: --quick)."""
    if budget < model.floor_bytes:
        raise ScalebenchError(f"the budget {gib(budget)} is below the process's measured "
                              f"floor {gib(model.floor_bytes)} for {label} (its smallest "
                              f"probe's peak, or its fitted baseline where lower)")
    sizes = sorted({point.size for point in model.points})
    default_workspace = {point.size: configuration.workspace(point.size)
                         for point in model.points}
    refining = {size for item in rounds or [] for size in item.sizes}
    common = {"label": label, "ranks": ranks, "size_parameter": configuration.size_parameter,
              "calibration_sizes": sizes, "cached": cached, "budget_bytes": budget,
              "baseline_bytes": model.baseline_bytes, "floor_bytes": model.floor_bytes,
              "approximate": model.approximate,
              "device": configuration.device, "configuration": configuration.key_record(),
              "probes": [[point.size, point.peak_bytes,
                          point.workspace != default_workspace[point.size],
                          point.size in refining]
                         for point in model.points],
              "quick": rounds is None,
              "refinement": [item.to_json() for item in rounds or []],
              "overrun_rounds": sum(item.overrun for item in rounds or []),
              "calibration_seconds": model.seconds, "time_budget_s": time_budget_s,
              "shared_with": sorted({point.shared_from for point in model.points} - {""}),
              "shared_probes": sum(bool(point.shared_from) for point in model.points),
              "time_probes": time_probes(model)}
    timing = time_model(model.points)
    if time_budget_s is not None and timing is None:
        raise ScalebenchError(f"{label}: --time needs a time-calibrated configuration, and "
                              f"its calibration's probes were not timed (remove its cache "
                              f"entries to calibrate it again)")
    if not model.grows:
        return CapacityLine(**common, largest_size=None, predicted_peak_bytes=None,
                            dominant_term=None, dominant_phase=None, terms={}, curve=[],
                            reason=(
                                f"no answer: the probed peaks do not grow with "
                                f"{configuration.size_parameter}; calibrate at larger sizes "
                                f"(--calibration-size)"))
    size, binding, reason = within_budgets(configuration, model, timing, ranks, budget,
                                           time_budget_s)
    line = curve(configuration, model, ranks, size)
    common.update(time_fields(configuration, timing, ranks, size,
                              [point[0] for point in line]))
    if size is None:
        return CapacityLine(**common, largest_size=None, predicted_peak_bytes=None,
                            dominant_term=None, dominant_phase=None, terms={}, curve=line,
                            reason=reason, binding=binding)
    counts = configuration.sizes(size, ranks, model)
    return CapacityLine(**common, binding=binding, largest_size=size,
                        predicted_peak_bytes=model.predict(counts),
                        dominant_term=model.dominant(counts),
                        dominant_phase=model.dominant_phase(counts), terms=model.terms(counts),
                        curve=line, probe_fraction=max(point.unknowns for point in model.points)
                        / counts.unknowns)


def capacity(config: Path, budget: int | None, nproc: int, size_parameter: str,
             device: str | None, largest_probe: int, verify: bool,
             parallel_config: Path | None = None, quick: bool = False,
             time_budget_s: float | None = None) -> list[CapacityLine]:
    """One line per configuration and rank count of ``config``, each calibrated then refined
    near its answer (refine.refined; ``quick``: the first calibration only); ``verify``: the
    largest predicted size of each one-rank line run once, whole (probe.run_probe), its peak
    and times measured. ``time_budget_s``: the answer's predicted run fits it too;
    ``budget`` None: no memory budget but what this machine has (refine.machine_bytes)."""
    if device == "cuda":
        if not cuda_available():
            raise ScalebenchError("--device cuda: no CUDA device here (give --device cpu for "
                                  "host memory)")
    check_budgets(budget, time_budget_s, quick)
    lines = []
    for configuration, label, ranks in configurations(config, nproc, size_parameter, device,
                                                      parallel_config):
        sizes = probe_sizes(configuration, largest_probe)
        memory = budget if budget is not None else machine_budget(configuration)
        if len(sizes) < 3:
            raise ScalebenchError(f"{label}: fewer than three valid {size_parameter} values "
                                  f"up to {largest_probe} to calibrate at (give a larger "
                                  f"--calibration-size)")
        done = None
        if quick:
            model, cached = calibrate(configuration, sizes)
            line = answer(configuration, label, ranks, memory, model, cached)
        else:
            check_cached_timing(configuration, sizes, label, time_budget_s)
            done = refined(configuration, sizes, ranks, memory)
            line = answer(configuration, label, ranks, memory, done.model, done.cached,
                          done.rounds, time_budget_s)
        if verify and ranks == 1 and line.largest_size is not None:
            line = verified_within(configuration, line, sizes, done)
        lines.append(line)
    return lines


def verified_within(configuration: Configuration, line: CapacityLine, sizes: list[int],
                    done: Refined | None) -> CapacityLine:
    """``line`` verified by a whole run at its answer. A refined line (``done``) whose run
    exceeded the memory budget takes the run as one more round (refine.with_overrun) and is
    answered and verified again, at most ``OVERRUN_ROUNDS`` times; a quick one is reported
    as measured."""
    line, run = verified(configuration, line)
    for _ in range(OVERRUN_ROUNDS):
        if done is None or line.measured_peak_bytes <= line.budget_bytes:
            break
        done = with_overrun(configuration, sizes, line.ranks, line.budget_bytes, done, run)
        line = answer(configuration, line.label, line.ranks, line.budget_bytes, done.model,
                      False, done.rounds, line.time_budget_s)
        if line.largest_size is None:
            break
        line, run = verified(configuration, line)
    return line


def verified(configuration: Configuration, line: CapacityLine
             ) -> tuple[CapacityLine, CalibrationPoint]:
    """``line`` with what a whole run at its answer measured: its peak, and (with a time
    model) its seconds per iteration and set-up; and the run, as a probe."""
    run = probe_point(configuration, line.largest_size, whole=True)
    line = replace(line, measured_peak_bytes=run.peak_bytes)
    if line.predicted_iteration_s is None:
        return line, run
    return replace(line, measured_iteration_s=measured_iteration(run.timing),
                   measured_setup_s=run.timing["setup_s"]), run
