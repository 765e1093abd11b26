"""deepinv's DRUNet (a U-Net with residual blocks), published, bundled or random weights."""

from __future__ import annotations

from scalebench.denoisers.spec import DenoiserSpec


def build(channels: int, weights, device):
    from deepinv.models import DRUNet

    from scalebench.denoisers.modules import load_network

    return load_network(DRUNet, "drunet", channels, weights, device)


# DRUNet downsamples three times (sides multiples of 8). Radius with deepinv's default widths
# (4 blocks per scale): 183 pixels, measured by an impulse at 512^2, rounded up to the 8-pixel
# grid.
SPEC = DenoiserSpec("drunet", "DRUNet (U-Net with residual blocks, noise-level map input)",
                    size_multiple=8, receptive_radius=184, volumes=False, build=build,
                    default_widths={"nc": [64, 128, 256, 512], "nb": 4},
                    feature_channels=lambda widths: widths["nc"][0])
