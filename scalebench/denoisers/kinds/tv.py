"""Total variation: deepinv's TV denoiser with every call independent and of a fixed length
(scalebench.denoisers.networks.IndependentTV); no weights, 2D and 3D."""

from __future__ import annotations

from scalebench.denoisers.spec import DenoiserSpec
from scalebench.rank.settings import process_settings

ITERATIONS = 50  # exactly this many per call: every TV step costs the same


def build(channels: int, weights, device):
    """A TV module of ITERATIONS inner iterations; a memory probe's settings
    (``tv_iterations``) give fewer where more hold nothing more (scalebench.experiment.
    capacity.probe.MAPPED_REPETITIONS). The tiling, hence the windows' memory, keeps
    ITERATIONS' radius."""
    from scalebench.denoisers.modules import IndependentTV

    return IndependentTV(process_settings().tv_iterations or ITERATIONS).to(device)


# Each iteration reads one neighbour further (a forward and a backward difference): the
# output reaches ITERATIONS pixels.
SPEC = DenoiserSpec("tv", "total variation (primal-dual, fixed iterations), no weights",
                    size_multiple=1, receptive_radius=ITERATIONS, volumes=True, build=build)
