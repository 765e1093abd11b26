"""deepinv's DnCNN (a plain stack of convolutions), published, bundled or random weights."""

from __future__ import annotations

from scalebench.denoisers.spec import DenoiserSpec


def build(channels: int, weights, device):
    from deepinv.models import DnCNN

    from scalebench.denoisers.modules import load_network

    return load_network(DnCNN, "dncnn", channels, weights, device)


# 20 convolutions of 3x3: the output reaches 20 pixels.
SPEC = DenoiserSpec("dncnn", "DnCNN (20 convolutions, residual)", size_multiple=1,
                    receptive_radius=20, volumes=False, build=build,
                    default_widths={"depth": 20, "nf": 64},
                    feature_channels=lambda widths: widths["nf"], blind=True)
