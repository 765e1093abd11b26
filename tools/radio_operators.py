"""The radio interferometry visibility transform in every library, side by side in one run.

For each size (image N x N, MeerKAT observation of T time steps x C channels x 2016
baselines, natural weights), every library of scalebench.physics.radio computes
A and A^T on the same float32 inputs. Printed per library: set-up time (plans, tables),
median time of A and of A^T, the relative error of A x and of A^T y against the exact direct
sums (float64) on a random subset of visibilities (A x: those rows; A^T y: a y supported on
them), the adjointness error |<A x, y> - <x, A^T y>| / (||A x|| ||y||), and which library is
the fastest accurate one (errors below ACCURACY). The direct DFT itself is timed at the
smallest size only.

    python -m tools.radio_operators [--sizes 64 256 1024] [--repeats 3] [--device cpu]
"""

from __future__ import annotations

import numpy as np
import torch

from scalebench.physics.backends import BACKENDS
from scalebench.physics.radio import VisibilityOperator
from scalebench.problems.radio_interferometry import observation_uv
from tools.measuring import (
    Stopwatch,
    Table,
    add_device,
    add_repeats,
    add_sizes,
    timed,
    tool_parser,
)

ACCURACY = 1e-4  # relative error that counts as accurate (far below any noise level used)
SUBSET = 2000  # visibilities checked against the direct sums
OBSERVATIONS = {64: (8, 2), 256: (32, 4), 512: (48, 4), 1024: (64, 8), 2048: (64, 16)}
LIBRARIES = [name for name in BACKENDS if name != "auto"]


def observation(size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(M, 2) uv in cycles per pixel (3 pixels per beam) and equal weights summing to 1."""
    times, channels = OBSERVATIONS.get(size, (64, 8))
    params = dict(hour_angle_start=-4.0, hour_angle_end=4.0, num_times=times,
                  declination_deg=-30.0, frequency_mhz=1284.0, bandwidth_mhz=856.0,
                  num_channels=channels)
    uv = observation_uv(params).reshape(-1, 2)
    uv = uv / (3.0 * np.linalg.norm(uv, axis=1).max())
    return torch.from_numpy(uv), torch.full((len(uv),), 1.0 / len(uv), dtype=torch.float64)


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm(a.double() - b.double())
                 / torch.linalg.vector_norm(b.double()))


def measure(library: str, uv, weights, x, y, rows, device, repeats) -> dict:
    with Stopwatch() as setup:
        operator = VisibilityOperator(uv, weights, x.shape[-1], library).to(device)
        operator.A(x)  # builds the transform (plans, interpolation tables)
    forward = timed(lambda: operator.A(x), repeats, device)
    adjoint = timed(lambda: operator.A_adjoint(y), repeats, device)
    ax, aty = forward.result, adjoint.result
    exact = VisibilityOperator(uv[rows], weights[rows], x.shape[-1], "dft").to(device)
    sparse_y = torch.zeros_like(y)
    sparse_y[..., rows] = y[..., rows]
    adjoint_of_subset = operator.A_adjoint(sparse_y)
    adjointness = abs(float(torch.sum(ax.double() * y.double()))
                      - float(torch.sum(x.double() * aty.double())))
    return {"setup_s": setup.seconds, "A_s": forward.median, "AT_s": adjoint.median,
            "A_error": relative(ax[..., rows], exact.A(x.double())),
            "AT_error": relative(adjoint_of_subset, exact.A_adjoint(y[..., rows].double())),
            "adjointness": adjointness / float(torch.linalg.vector_norm(ax.double())
                                               * torch.linalg.vector_norm(y.double()))}


def compare(size: int, device: torch.device, repeats: int, smallest: bool) -> None:
    uv, weights = observation(size)
    generator = torch.Generator().manual_seed(size)
    x = torch.rand((1, 1, size, size), generator=generator).to(device)
    y = torch.randn((1, 2, len(uv)), generator=generator).to(device)
    rows = torch.randperm(len(uv), generator=generator)[:SUBSET].to(device)
    print(f"\nN = {size}, M = {len(uv)} visibilities, {torch.get_num_threads()} threads, "
          f"{device}")
    table = Table("library", "set-up s", "A s", "A^T s", "A error", "A^T error", "adjoint")
    table.header()
    results = {}
    for library in LIBRARIES:
        if library == "dft" and not smallest:
            continue
        try:
            results[library] = row = measure(library, uv, weights, x, y, rows, device,
                                             repeats)
        except (ImportError, RuntimeError) as error:
            table.row(library, f"unavailable: {error}")
            continue
        table.row(library, f"{row['setup_s']:.3f}", f"{row['A_s']:.4f}", f"{row['AT_s']:.4f}",
                  f"{row['A_error']:.1e}", f"{row['AT_error']:.1e}", f"{row['adjointness']:.1e}")
    accurate = {name: row["A_s"] + row["AT_s"] for name, row in results.items()
                if max(row["A_error"], row["AT_error"]) < ACCURACY}
    if accurate:
        best = min(accurate, key=accurate.get)
        ratios = ", ".join(f"{name} {accurate_time / accurate[best]:.1f}x"
                           for name, accurate_time in sorted(accurate.items(),
                                                             key=lambda item: item[1]))
        print(f"fastest accurate (A + A^T): {best}; time relative to it: {ratios}")


def main(argv: list[str] | None = None) -> None:
    parser = tool_parser(__doc__, __file__)
    add_sizes(parser, [64, 256, 1024])
    add_repeats(parser, 3, "calls of A and of A^T timed")
    add_device(parser)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    for index, size in enumerate(sorted(args.sizes)):
        compare(size, device, args.repeats, smallest=index == 0)


if __name__ == "__main__":
    main()
