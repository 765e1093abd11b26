"""Generated 3D volumes, denoised: training patches (scalebench.training.problems)."""

from scalebench.params import benchopt_parameters
from scalebench.training.problems import TRAINING_PROBLEMS
from scalebench.training.solver import TrainingDataset


class Dataset(TrainingDataset):
    # Key of the problem in scalebench.training.problems.TRAINING_PROBLEMS; also the dataset
    # name in results.
    name = "volume_denoising"
    # Default grid: one value per parameter; each parameter's contract (type, range, meaning)
    # is its Param in TRAINING_PROBLEMS[name].params.
    parameters = benchopt_parameters(TRAINING_PROBLEMS[name].params)
    # Installed with scalebench; no extra requirement.
    requirements = []
