"""Re-run the bundled denoisers' recipes and compare them with the shipped files.

    python -m tools.check_bundled_denoisers [--only NAME ...] [--tolerance-db 0.2] [--rerun DIR]

Retrains each recipe (scalebench.denoisers.bundled.RECIPES) into a temporary folder, then
denoises the held-out astronaut photograph at each noise level of
scalebench.denoisers.bundled.EVAL_SIGMAS with the shipped and the retrained network, and
prints both PSNRs and their difference, and whether the two files are identical. Exit 1 when
a difference exceeds the tolerance, 0 otherwise. Minutes per model on the CPU; run it with
`nice` on a shared machine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from scalebench.data.fetch import BUNDLED_WEIGHTS
from scalebench.denoisers.bundled import (
    EVAL_SIGMAS,
    RECIPES,
    held_out_figures,
    load_bundled,
    load_record,
    train_and_save,
)
from tools.measuring import Table, tool_parser


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, __file__)
    parser.add_argument("--only", nargs="+", choices=sorted(RECIPES), default=sorted(RECIPES))
    parser.add_argument("--tolerance-db", type=float, default=0.2)
    parser.add_argument("--shipped", type=Path, default=BUNDLED_WEIGHTS, help=argparse.SUPPRESS)
    parser.add_argument("--rerun", type=Path, default=None,
                        help="compare with the files a separate run of "
                             "python -m tools.train_bundled_denoisers --out DIR wrote, "
                             "instead of training again")
    args = parser.parse_args(argv)
    worst = 0.0
    print("PSNR (dB) on the held-out astronaut")
    table = Table("model", "sigma", "noisy", "shipped", "re-run", "diff", "re-run file")
    table.header()
    with tempfile.TemporaryDirectory() as temporary:
        folder = args.rerun or Path(temporary)
        for name in args.only:
            recipe = RECIPES[name]
            again = load_record(name, folder) if args.rerun else \
                train_and_save(recipe, folder, log=lambda _: None)
            shipped = held_out_figures(load_bundled(name, args.shipped), recipe.channels)
            rerun = held_out_figures(load_bundled(name, folder), recipe.channels)
            for sigma in map(str, EVAL_SIGMAS):
                difference = rerun[sigma]["denoised_psnr_db"] - shipped[sigma]["denoised_psnr_db"]
                worst = max(worst, abs(difference))
                table.row(name, sigma, f"{shipped[sigma]['noisy_psnr_db']:.2f}",
                          f"{shipped[sigma]['denoised_psnr_db']:.2f}",
                          f"{rerun[sigma]['denoised_psnr_db']:.2f}", f"{difference:+.3f}")
            same = again["sha256"] == load_record(name, args.shipped)["sha256"]
            table.row(name, "", "", "", "", "", f"{'identical to' if same else 'differs from'}"
                      f" the shipped one; {again['training_seconds']} s")
    verdict = "within" if worst <= args.tolerance_db else "OUTSIDE"
    print(f"largest difference {worst:.3f} dB: {verdict} the {args.tolerance_db} dB tolerance")
    return 0 if worst <= args.tolerance_db else 1


if __name__ == "__main__":
    sys.exit(main())
