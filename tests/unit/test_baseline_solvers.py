"""Contract of the classical baselines' benchmark files: under plain benchopt (no scalebench
validation) each skips a dataset it does not apply to, with the one-line reason scalebench
refuses the pair with, and runs on the one it applies to."""

import pytest

from scalebench.experiment.benchmark_files import imported_class
from scalebench.problems import setup_problem
from scalebench.repository import REPO

SMALL_CT = ("tomography_2d", {"image_size": 32})
SMALL_RADIO = ("radio_interferometry", {"image_size": 32, "num_times": 4, "num_channels": 1})
DENOISING = ("synthetic", {"image_size": 32, "task": "denoising"})

# solver file: (a dataset it does not apply to, the one it applies to (None: the walnut,
# which a fresh machine has not fetched), the dataset the reason names)
BASELINES = {
    "fbp": (DENOISING, SMALL_CT, "tomography_2d"),
    "fdk": (SMALL_CT, None, "walnut_conebeam"),
    "clean": (SMALL_CT, SMALL_RADIO, "radio_interferometry"),
}


def solver_file(name: str):
    path = REPO / "benchmark_inference" / "solvers" / f"{name}.py"
    return imported_class(path, "Solver")(device="cpu")


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_under_plain_benchopt_a_baseline_skips_a_dataset_it_does_not_apply_to(name):
    (wrong, wrong_params), applies, reason_dataset = BASELINES[name]
    solver = solver_file(name)
    assert solver.skip(setup_problem(wrong, **wrong_params)) == \
        (True, f"does not apply (it applies to dataset {reason_dataset} only)")
    if applies is not None:
        dataset, params = applies
        assert solver.skip(setup_problem(dataset, **params)) == (False, None)
