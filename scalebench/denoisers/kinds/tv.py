"""Total variation: deepinv's TV denoiser with every call independent and of a fixed length
(scalebench.denoisers.networks.IndependentTV); no weights, 2D and 3D."""

from __future__ import annotations

from scalebench.denoisers.spec import DenoiserSpec

ITERATIONS = 50  # exactly this many per call: every TV step costs the same
# Set by a memory probe where more iterations hold nothing more (scalebench.experiment.
# capacity.probe.MAPPED_REPETITIONS): the modules it builds run this many instead. The
# tiling, hence the windows' memory, keeps ITERATIONS' radius.
PROBE_ITERATIONS: int | None = None


def build(channels: int, weights, device):
    from scalebench.denoisers.modules import IndependentTV

    return IndependentTV(PROBE_ITERATIONS or ITERATIONS).to(device)


# Each iteration reads one neighbour further (a forward and a backward difference): the
# output reaches ITERATIONS pixels.
SPEC = DenoiserSpec("tv", "total variation (primal-dual, fixed iterations), no weights",
                    size_multiple=1, receptive_radius=ITERATIONS, volumes=True, build=build)
