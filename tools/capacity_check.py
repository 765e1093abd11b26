"""The calibrated memory model against measured peaks, side by side in one run.

For CT (ASTRA's and the torch projector), super-resolution, radio interferometry and
synthetic denoising (DnCNN), each calibrated at sizes up to ``--calibration-size``
(scalebench.experiment.capacity, a fresh cache; a network on the CPU adds its regime probe,
calibration.regime_size): the predicted and the measured peak (host memory, fresh processes)
at the sizes of 4x and 16x the unknowns of the largest calibration size (twice and four times
its side), their ratio, and the ratio of their size-dependent parts
(peak less the fitted process baseline). Then, with ``--budget``: the largest size predicted
to fit it with the answer's headroom (calibration.HEADROOM), run once (its measured peak must
be within the budget) and the prediction at the next size step (above the budget less the
headroom).

Targets: every predicted peak within 15 % of the measured one; the largest predicted size
within the budget, the next step above it.

    python tools/capacity_check.py [--calibration-size 256] [--budget 3GiB] [--only NAME]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

TARGET = 0.15
RADIO = {"declination_deg": -30.0, "hour_angle_start": -4.0, "hour_angle_end": 4.0,
         "num_times": 64, "frequency_mhz": 1284.0, "bandwidth_mhz": 856.0, "num_channels": 8,
         "weighting": "natural", "num_operators": 4, "noise_level": 0.01}
PNP = {"denoiser": "tv", "device": "cpu", "denoiser_sigma": 0.01}
CASES = {
    "ct_astra": ("tomography_2d", {"num_angles": 90, "projector": "astra",
                                   "noise_level": 0.01}, "pnp", PNP),
    "ct_torch": ("tomography_2d", {"num_angles": 45, "projector": "torch",
                                   "noise_level": 0.01}, "pnp", PNP),
    "superres": ("multiframe_superres", {"num_frames": 4, "factor": 4}, "pnp", PNP),
    "radio": ("radio_interferometry", RADIO, "pnp", PNP),
    "denoising": ("synthetic", {"task": "denoising"}, "denoiser",
                  {"denoiser": "dncnn", "pretrained": "none", "device": "cpu",
                   "denoiser_sigma": 0.05}),
}


def gib(value: float) -> str:
    return f"{value / 2**30:7.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calibration-size", type=int, default=256)
    parser.add_argument("--budget", default="3GiB")
    parser.add_argument("--only", choices=tuple(CASES), nargs="*", default=None)
    args = parser.parse_args()
    os.environ["SCALEBENCH_CACHE"] = tempfile.mkdtemp(prefix="capacity-check-")
    from scalebench.experiment.capacity.calibration import (
        Configuration,
        calibrate,
        largest_fitting,
        probe_point,
        probe_sizes,
        usable_budget,
        valid_at_most,
    )
    from scalebench.experiment.capacity.model import PHASES
    from scalebench.launch.slurm_requests import memory_bytes

    budget = memory_bytes(args.budget, "--budget", bare_unit="B")
    verdicts = []
    print(f"{'case':10} {'size':>5}  {'predicted GiB':>13} {'measured GiB':>12} "
          f"{'ratio':>6} {'size part ratio':>15}  dominant")
    for name in args.only or CASES:
        dataset, dataset_params, solver, solver_params = CASES[name]
        configuration = Configuration(dataset, dataset_params, solver, solver_params,
                                      "image_size")
        sizes = probe_sizes(configuration, args.calibration_size)
        model, _ = calibrate(configuration, sizes)
        print(f"{name:10} calibrated at {sorted({point.size for point in model.points})}")
        for phase, coefficients in zip(PHASES, model.phase_coefficients, strict=True):
            print(f"{'':10} {phase}: baseline {gib(coefficients[0]).strip()} GiB, bytes per "
                  f"unknown {coefficients[1]:.1f}, per measurement {coefficients[2]:.1f}, "
                  f"per denoised pixel {coefficients[3]:.1f}, per workspace element "
                  f"{coefficients[4]:.1f}")
        largest_probe = max(point.size for point in model.points)  # a regime probe's too
        for factor in (2, 4):
            size = valid_at_most(configuration, factor * largest_probe)
            counts = configuration.sizes(size, 1, model)
            predicted = model.predict(counts)
            measured = probe_point(configuration, size).peak_bytes
            part = (predicted - model.baseline_bytes) / max(measured - model.baseline_bytes, 1)
            ratio = predicted / measured
            verdicts.append((f"{name} at {size}", ratio, abs(ratio - 1) <= TARGET))
            print(f"{name:10} {size:5}  {gib(predicted):>13} {gib(measured):>12} "
                  f"{ratio:6.3f} {part:15.3f}  {model.dominant(counts)} in the "
                  f"{model.dominant_phase(counts)}", flush=True)
        if not model.grows:
            verdicts.append((f"{name}: the calibration grows with the size", 0.0, False))
            print(f"{name:10} no budget answer: the probed peaks do not grow with the size")
            continue
        usable = usable_budget(model, budget)  # the answer keeps calibration.HEADROOM free
        largest = largest_fitting(configuration, model, 1, usable)
        if largest is None:
            print(f"{name:10} nothing fits {args.budget}")
            continue
        measured = probe_point(configuration, largest).peak_bytes
        step = next(size for size in range(largest + 1, 2 * largest + 2)
                    if configuration.valid(size))
        above = model.predict(configuration.sizes(step, 1, model))
        verdicts.append((f"{name} largest {largest} within {args.budget}", measured / budget,
                         measured <= budget))
        verdicts.append((f"{name} next size {step} predicted above {args.budget} less the "
                         f"headroom", above / usable, above > usable))
        # Not a target (it lies far past 16x the calibrated unknowns), but what the answer's
        # margin is: a ratio above 1 leaves memory unused.
        predicted = model.predict(configuration.sizes(largest, 1, model))
        print(f"{name:10} budget {args.budget}: largest {largest}, predicted "
              f"{gib(predicted).strip()} GiB, measured {gib(measured).strip()} GiB (ratio "
              f"{predicted / measured:.2f}); next size {step} predicted {gib(above).strip()} "
              f"GiB", flush=True)
    for label, value, met in verdicts:
        print(f"target {label}: {value:.3f} {'met' if met else 'NOT met'}")
    return 0 if all(met for _, _, met in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
