"""Multi-frame super-resolution of a colour photograph: training patches."""

from scalebench.benchmarks import TRAINING
from scalebench.benchopt_glue.training import TrainingDataset
from scalebench.param_spec import benchopt_parameters


class Dataset(TrainingDataset):
    # Key of the problem in scalebench.benchmarks.TRAINING.problems; also the dataset
    # name in results.
    name = "multiframe_superres"
    # Default grid: one value per parameter; each parameter's contract (type, range, meaning)
    # is its Param in TRAINING.problems[name].params.
    parameters = benchopt_parameters(TRAINING.problems[name].params)
    # Installed with scalebench; no extra requirement.
    requirements = []
