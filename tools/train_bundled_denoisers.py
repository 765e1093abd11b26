"""Train the bundled denoisers (scalebench.denoisers.bundled.RECIPES), write their weights and
records.

    python -m tools.train_bundled_denoisers [--only NAME ...] [--out DIR]

Writes DIR/<name>.pth and DIR/<name>.json (default DIR: scalebench/data/weights, the shipped
files) and prints each file's sha256 and its manifest entry (scalebench/data/manifest.toml,
kind "bundled"): paste it there when the shipped files change, then `make image-definitions`.
Runs on the CPU in minutes per model; run it with `nice` on a shared machine.
"""

from __future__ import annotations

import sys
from pathlib import Path

from scalebench.data.fetch import BUNDLED_WEIGHTS
from scalebench.denoisers.bundled import RECIPES, train_and_save
from tools.measuring import tool_parser


def manifest_entry(document: dict) -> str:
    return "\n".join([
        f"[{document['name']}_bundled]",
        'kind = "bundled"',
        f"file = \"{document['file']}\"",
        f"size = {document['size']}",
        f"checksum = \"sha256:{document['sha256']}\"",
        'checksum_source = "computed when trained by python -m tools.train_bundled_denoisers '
        f'(recipe record {document["name"]}.json beside the file)"',
        'licence = "weights trained by scalebench; training pictures under the terms listed in '
        'scikit-image\'s skimage/data/README.txt"',
    ])


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, __file__)
    parser.add_argument("--only", nargs="+", choices=sorted(RECIPES), default=sorted(RECIPES))
    parser.add_argument("--out", type=Path, default=BUNDLED_WEIGHTS)
    args = parser.parse_args(argv)
    for name in args.only:
        document = train_and_save(RECIPES[name], args.out)
        figures = document["held_out_check"]["psnr_db"]["0.05"]
        print(f"{name}: {document['architecture']['parameters']} parameters, "
              f"{document['training_seconds']} s, held-out PSNR at sigma 0.05: "
              f"{figures['noisy_psnr_db']} -> {figures['denoised_psnr_db']} dB")
        print(manifest_entry(document), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
