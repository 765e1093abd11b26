"""3D cone-beam CT of the measured Walnut scan (scalebench.problems.walnut_conebeam)."""

import sys

from scalebench.benchopt_glue.base import ProblemDataset
from scalebench.param_spec import benchopt_parameters
from scalebench.problems import PROBLEMS


class Dataset(ProblemDataset):
    # Key of the problem in scalebench.problems.PROBLEMS; also the dataset name in results.
    name = "walnut_conebeam"
    # Default grid: one value per parameter; each parameter's contract (type, range, meaning)
    # is its Param in scalebench.problems.walnut_conebeam.PARAMS.
    parameters = benchopt_parameters(PROBLEMS[name].params)
    # Reads the TIFF files of the data set (tifffile); ASTRA (the `image` extra) is optional:
    # projector 'astra' on GPU nodes.
    requirements = ["pip::tifffile"]
    # The download and unpacking do not depend on the parameters; the pre-processing per
    # parameter set is cached by scalebench itself.
    prepare_cache_ignore = "all"
    # benchopt's own test suite: a small volume and few views (the cache must hold a walnut,
    # e.g. the miniature one the project's tests make).
    test_config = {"binning": 2, "num_projections": 8, "projector": "torch"}

    @classmethod
    def is_installed(cls, **kwargs) -> bool:
        # Installed means its packages and the fetched walnut (`benchopt install --prepare`
        # or `scalebench fetch --data walnut`): benchopt's suite skips it otherwise, and
        # `benchopt run` says "not installed" after the line printed here.
        from scalebench.data.cache import cache_root
        from scalebench.data.walnut import is_unpacked, not_fetched_message

        if not super().is_installed(**kwargs):
            return False
        if not is_unpacked(cache_root()):
            print(f"{cls.name}: {not_fetched_message(cache_root())}", file=sys.stderr)
            return False
        return True

    def prepare(self) -> None:
        """`benchopt install --prepare` / `benchopt prepare`: fetch the walnut into the cache
        (the one `scalebench fetch --data walnut` fills; nothing is downloaded when it is
        there or with SCALEBENCH_OFFLINE=1)."""
        from scalebench.data.fetch import fetch_data

        fetch_data("walnut")
