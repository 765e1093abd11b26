"""Write a miniature walnut (32^3 volume, 16 views per orbit) into a scalebench cache folder.

It has the Walnut data set's file layout and is unpacked as `scalebench fetch --data walnut`
would, so experiments on walnut_conebeam run without the download:

    python -m tools.miniature_walnut /tmp/walnut-cache
    SCALEBENCH_CACHE=/tmp/walnut-cache scalebench run configs/examples/walnut_conebeam.yml

(with `binning` at most 32 and `num_projections` at most 16). The same generator makes the
tests' fixture (tests/support/walnut_fixture.py).
"""

from __future__ import annotations

from pathlib import Path

from tests.support.walnut_fixture import walnut_cache
from tools.measuring import tool_parser


def main(argv: list[str] | None = None) -> None:
    parser = tool_parser(__doc__, __file__)
    parser.add_argument("cache_folder", type=Path, help="the cache folder written")
    args = parser.parse_args(argv)
    print(f"miniature walnut in {walnut_cache(args.cache_folder)}")


if __name__ == "__main__":
    main()
