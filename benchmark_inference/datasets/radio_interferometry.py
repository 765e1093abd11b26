"""MeerKAT radio interferometry of a high-dynamic-range sky
(scalebench.problems.radio_interferometry)."""

from scalebench.benchopt_glue.base import ProblemDataset
from scalebench.param_spec import benchopt_parameters
from scalebench.problems import PROBLEMS


class Dataset(ProblemDataset):
    # Key of the problem in scalebench.problems.PROBLEMS; also the dataset name in results.
    name = "radio_interferometry"
    # Default grid: one value per parameter; each parameter's contract (type, range, meaning)
    # is its Param in scalebench.problems.radio_interferometry.PARAMS.
    parameters = benchopt_parameters(PROBLEMS[name].params)
    # The visibility transforms (ducc0, finufft, deepinv's torchkbnufft) and the FITS reader;
    # the same pins as scalebench's "radio" extra. cufinufft (CUDA) is optional.
    requirements = ["pip::ducc0==0.42.0", "pip::finufft==2.5.1", "pip::torchkbnufft==1.5.2",
                    "pip::astropy==8.0.2"]
