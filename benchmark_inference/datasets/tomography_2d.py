"""2D parallel-beam CT of the Shepp-Logan phantom (scalebench.problems.tomography_2d)."""

from scalebench.benchopt_support import ProblemDataset
from scalebench.params import benchopt_parameters
from scalebench.problems import PROBLEMS


class Dataset(ProblemDataset):
    # Key of the problem in scalebench.problems.PROBLEMS; also the dataset name in results.
    name = "tomography_2d"
    # Default grid: one value per parameter; each parameter's contract (type, range, meaning)
    # is its Param in scalebench.problems.tomography_2d.PARAMS.
    parameters = benchopt_parameters(PROBLEMS[name].params)
    # Installed with scalebench; no extra requirement.
    requirements = []
