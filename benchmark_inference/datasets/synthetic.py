"""Generated ellipses at any size, super-resolved or denoised (scalebench.problems.synthetic)."""

from scalebench.benchopt_glue.base import ProblemDataset
from scalebench.param_spec import benchopt_parameters
from scalebench.problems import PROBLEMS


class Dataset(ProblemDataset):
    # Key of the problem in scalebench.problems.PROBLEMS; also the dataset name in results.
    name = "synthetic"
    # Default grid: one value per parameter; each parameter's contract (type, range, meaning)
    # is its Param in scalebench.problems.synthetic.PARAMS.
    parameters = benchopt_parameters(PROBLEMS[name].params)
    # Installed with scalebench; no extra requirement.
    requirements = []
    # `benchopt test`: a small denoising problem (the objective's test dataset).
    test_config = {"image_size": 32, "task": "denoising"}
