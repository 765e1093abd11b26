"""2D parallel-beam CT of the Shepp-Logan phantom (scalebench.problems.tomography_2d)."""

from scalebench.benchopt_glue.base import ProblemDataset
from scalebench.param_spec import benchopt_parameters
from scalebench.problems import PROBLEMS


class Dataset(ProblemDataset):
    # Key of the problem in scalebench.problems.PROBLEMS; also the dataset name in results.
    name = "tomography_2d"
    # Default grid: one value per parameter; each parameter's contract (type, range, meaning)
    # is its Param in scalebench.problems.tomography_2d.PARAMS.
    parameters = benchopt_parameters(PROBLEMS[name].params)
    # ASTRA's projectors (projector 'astra', chosen by 'auto' where installed); without it,
    # 'auto' falls back to the torch projector. Also in scalebench's [image] and [test] extras.
    requirements = ["pip::astra-toolbox==2.5.0"]
