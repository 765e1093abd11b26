"""Multi-frame super-resolution of a colour photograph (scalebench.problems.multiframe_superres)."""

from scalebench.benchopt_glue.base import ProblemDataset
from scalebench.param_spec import benchopt_parameters
from scalebench.problems import PROBLEMS


class Dataset(ProblemDataset):
    # Key of the problem in scalebench.problems.PROBLEMS; also the dataset name in results.
    name = "multiframe_superres"
    # Default grid: one value per parameter; each parameter's contract (type, range, meaning)
    # is its Param in scalebench.problems.multiframe_superres.PARAMS.
    parameters = benchopt_parameters(PROBLEMS[name].params)
    # Installed with scalebench; no extra requirement.
    requirements = []
