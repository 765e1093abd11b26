"""2D parallel-beam CT of the Shepp-Logan phantom: training patches."""

from scalebench.benchopt_glue.training import TrainingDataset
from scalebench.param_spec import benchopt_parameters
from scalebench.problems.training import TRAINING_PROBLEMS


class Dataset(TrainingDataset):
    # Key of the problem in scalebench.problems.training.TRAINING_PROBLEMS; also the dataset
    # name in results.
    name = "tomography_2d"
    # Default grid: one value per parameter; each parameter's contract (type, range, meaning)
    # is its Param in TRAINING_PROBLEMS[name].params.
    parameters = benchopt_parameters(TRAINING_PROBLEMS[name].params)
    # Installed with scalebench; no extra requirement.
    requirements = []
