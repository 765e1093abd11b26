"""2D parallel-beam CT of the Shepp-Logan phantom: training patches."""

from scalebench.benchmarks import TRAINING
from scalebench.benchopt_glue.training import TrainingDataset
from scalebench.param_spec import benchopt_parameters


class Dataset(TrainingDataset):
    # Key of the problem in scalebench.benchmarks.TRAINING.problems; also the dataset
    # name in results.
    name = "tomography_2d"
    # Default grid: one value per parameter; each parameter's contract (type, range, meaning)
    # is its Param in TRAINING.problems[name].params.
    parameters = benchopt_parameters(TRAINING.problems[name].params)
    # Installed with scalebench; no extra requirement.
    requirements = []
