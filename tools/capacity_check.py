"""How large fits, checked at the answer itself: ``scalebench capacity``'s refined answer run
once and its peak measured.

For CT (ASTRA, 256 angles, PnP-TV) at 3 GiB, multi-frame super-resolution (4 frames, the
bundled DnCNN on tiles of 128) at 4 GiB, radio interferometry (the radio example's
telescope, PnP-TV) at 3 GiB and synthetic denoising (DnCNN, random weights) at 3 GiB, each in
a fresh calibration cache: the calibration refined near its answer as the command does
(scalebench.planning.capacity.refine.refined; ``--quick``: the first calibration only, as
``scalebench capacity --quick``) with each probe's wall and CPU time, the calibration's
wall time, its probes' CPU time and the machine's load average (the wall time depends on
the load, the peaks do not), every refinement round (its probes, and
at its largest the previous model's prediction against the measurement), the largest size
predicted to fit the budget with the answer's headroom, the predicted and measured peak
there (host memory, a fresh process) and their ratio, and the next valid size's prediction.

Targets: predicted / measured at the answer within 0.85-1.15; the measured peak within the
budget; the next size predicted above the budget less the headroom; the calibration under 5
minutes.

    python -m tools.capacity_check [--only NAME ...] [--budget 3GiB] [--quick]
        [--calibration-size 128]
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile

from tools.measuring import Stopwatch, load_text, print_targets, tool_parser

RATIO_LOW, RATIO_HIGH = 0.85, 1.15
CALIBRATION_TARGET_S = 300
RADIO = {"declination_deg": -30.0, "hour_angle_start": -4.0, "hour_angle_end": 4.0,
         "num_times": 64, "frequency_mhz": 1284.0, "bandwidth_mhz": 856.0, "num_channels": 8,
         "weighting": "natural", "num_operators": 4, "noise_level": 0.01}
TV = {"denoiser": "tv", "device": "cpu", "denoiser_sigma": 0.01}
# name: (dataset, its parameters, solver, its parameters, budget)
CASES = {
    "ct_astra": ("tomography_2d", {"num_angles": 256, "projector": "astra",
                                   "noise_level": 0.01}, "pnp", TV, "3GiB"),
    "superres": ("multiframe_superres", {"num_frames": 4}, "pnp",
                 {"denoiser": "dncnn", "pretrained": "bundled", "tile_size": 128,
                  "device": "cpu", "denoiser_sigma": 0.01}, "4GiB"),
    "radio": ("radio_interferometry", RADIO, "pnp", TV, "3GiB"),
    "denoising": ("synthetic", {"task": "denoising"}, "denoiser",
                  {"denoiser": "dncnn", "pretrained": "none", "device": "cpu",
                   "denoiser_sigma": 0.05}, "3GiB"),
}


def gib(value: float) -> str:
    return f"{value / 2**30:.3f}"


def timed_probes() -> None:
    """Each probe of the calibrations prints its parameters, wall time and CPU time (the
    probe's own log lines)."""
    from scalebench.planning.capacity.probe import LOG

    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("    %(message)s"))
    LOG.addHandler(handler)
    LOG.setLevel(logging.INFO)


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, __file__)
    parser.add_argument("--only", choices=tuple(CASES), nargs="*", default=None)
    parser.add_argument("--budget", default=None, help="every case's budget (default: each "
                        "case's own)")
    parser.add_argument("--quick", action="store_true",
                        help="the first calibration only (scalebench capacity --quick)")
    parser.add_argument("--calibration-size", type=int, default=128)
    args = parser.parse_args(argv)
    os.environ["SCALEBENCH_CACHE"] = tempfile.mkdtemp(prefix="capacity-check-")
    from scalebench.launch.slurm_requests import memory_bytes
    from scalebench.planning.capacity.calibration import (
        calibrate,
        probe_point,
        probe_sizes,
        usable_budget,
    )
    from scalebench.planning.capacity.command import answer
    from scalebench.planning.capacity.configuration import Configuration
    from scalebench.planning.capacity.probe import children_cpu_seconds
    from scalebench.planning.capacity.refine import refined

    timed_probes()
    verdicts = []
    for name in args.only or CASES:
        dataset, dataset_params, solver, solver_params, budget_text = CASES[name]
        budget_text = args.budget or budget_text
        budget = memory_bytes(budget_text, "--budget", bare_unit="B")
        configuration = Configuration(dataset, dataset_params, solver, solver_params,
                                      "image_size")
        sizes = probe_sizes(configuration, args.calibration_size)
        cpu_started, load_started = children_cpu_seconds(), load_text()
        with Stopwatch() as watch:
            if args.quick:
                model, _ = calibrate(configuration, sizes)
                rounds = None
            else:
                done = refined(configuration, sizes, 1, budget)
                model, rounds = done.model, done.rounds
        wall, cpu = watch.seconds, children_cpu_seconds() - cpu_started
        line = answer(configuration, name, 1, budget, model, False, rounds)
        print(f"{name}: {line.calibration_text()}; wall {wall:.0f} s, probes' CPU time "
              f"{cpu:.0f} s, load average {load_started} at the start, {load_text()} at the "
              f"end (1/5/15 min, {os.cpu_count()} cores)", flush=True)
        for index, item in enumerate(rounds or [], 1):
            print(f"  round {index}: probed {item.sizes}; at {item.newest} predicted "
                  f"{gib(item.predicted_bytes)} GiB, measured {gib(item.measured_bytes)} GiB "
                  f"(ratio {item.ratio:.3f})", flush=True)
        verdicts.append((f"{name} calibration wall time (s)", wall < CALIBRATION_TARGET_S,
                         f"{wall:.3f}"))
        if line.largest_size is None:
            verdicts.append((f"{name}: {line.reason}", False, "no answer"))
            continue
        largest = line.largest_size
        measured = probe_point(configuration, largest, whole=True).peak_bytes
        ratio = line.predicted_peak_bytes / measured
        step = next(size for size in range(largest + 1, 2 * largest + 2)
                    if configuration.valid(size))
        above = model.predict(configuration.sizes(step, 1, model))
        usable = usable_budget(model, budget)  # the answer keeps calibration.HEADROOM free
        print(f"  answer within {budget_text}: {largest}, predicted "
              f"{gib(line.predicted_peak_bytes)} GiB, measured {gib(measured)} GiB, ratio "
              f"{ratio:.3f}; next size {step} predicted {gib(above)} GiB (the answer may "
              f"predict {gib(usable)} GiB)", flush=True)
        verdicts.append((f"{name} predicted / measured at {largest}",
                         RATIO_LOW <= ratio <= RATIO_HIGH, f"{ratio:.3f}"))
        verdicts.append((f"{name} measured at {largest} / budget {budget_text}",
                         measured <= budget, f"{measured / budget:.3f}"))
        verdicts.append((f"{name} next size {step} predicted / budget less the headroom",
                         above > usable, f"{above / usable:.3f}"))
    return print_targets(verdicts)


if __name__ == "__main__":
    sys.exit(main())
