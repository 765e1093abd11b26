"""Write a miniature walnut (32^3 volume, 16 views per orbit) into a scalebench cache folder.

It has the Walnut data set's file layout and is unpacked as `scalebench fetch --data walnut`
would, so experiments on walnut_conebeam run without the download:

    python tools/miniature_walnut.py /tmp/walnut-cache
    SCALEBENCH_CACHE=/tmp/walnut-cache scalebench run configs/examples/walnut_conebeam.yml

(with `binning` at most 32 and `num_projections` at most 16). The same generator makes the
tests' fixture (tests/support/walnut_fixture.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.walnut_fixture import walnut_cache  # noqa: E402

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tools/miniature_walnut.py CACHE_FOLDER")
    print(f"miniature walnut in {walnut_cache(Path(sys.argv[1]))}")
