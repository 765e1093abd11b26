"""Image families: every name draws its image at any size, seeded images are reproducible,
the validation and test splits are disjoint members of their family, names outside it are
refused in one line, and the default image leaves today's config hashes unchanged."""

import json

import pytest
import torch

from provenance import array_digest, canonical_json, config_hash
from scalebench.errors import ConfigError
from scalebench.experiment.config import load_config
from scalebench.experiment.expand import expand
from scalebench.problems import (
    PROBLEMS,
    image_family,
    image_of,
    setup_problem,
    split_images,
    split_of,
)
from scalebench.problems.images import SPLITS
from scalebench.rank.stamping import experiment_config
from tests.support.cli import tiny_experiment
from tests.support.paths import REPO

FAMILIES = sorted(name for name, spec in PROBLEMS.items() if spec.images is not None)
SIZES = (32, 48)


def _names(problem: str) -> list[str]:
    family = image_family(problem)
    return list(dict.fromkeys((*family.named, family.default, *family.validation,
                               *family.test, f"{family.seeded}-7")))


def test_the_families_are_ct_super_resolution_and_radio():
    assert FAMILIES == ["multiframe_superres", "radio_interferometry", "tomography_2d"]
    with pytest.raises(ConfigError, match="dataset 'walnut_conebeam' has no image family "
                                          "\\(datasets with one: multiframe_superres, "):
        split_images("walnut_conebeam", "test")


@pytest.mark.parametrize("problem", FAMILIES)
@pytest.mark.parametrize("size", SIZES)
def test_every_name_of_a_family_draws_an_image_of_its_shape_and_range(problem, size):
    family = image_family(problem)
    for name in _names(problem):
        image = family.image(name, size)
        assert image.shape == (1, family.channels, size, size), name
        assert image.dtype == torch.float32 and torch.isfinite(image).all(), name
        assert image.min() >= 0.0, name
        if problem != "radio_interferometry":  # a sky's overlapping sources pass its peak
            assert image.max() <= 1.0, name
        assert image.max() > image.min(), name  # a constant image has no PSNR


@pytest.mark.parametrize("problem", FAMILIES)
def test_seeded_images_are_reproducible_and_differ_between_seeds(problem):
    family = image_family(problem)
    first, again = family.image(f"{family.seeded}-3", 32), family.image(f"{family.seeded}-3", 32)
    other = family.image(f"{family.seeded}-4", 32)
    assert torch.equal(first, again)
    assert not torch.equal(first, other)


def test_a_ct_phantom_is_a_body_with_inner_structures():
    phantom = image_family("tomography_2d").image("phantom-5", 64)[0, 0]
    assert phantom[0].eq(0).all() and phantom[:, 0].eq(0).all()  # air around the body
    assert phantom[32, 32] > 0  # the body at the centre
    assert len(torch.unique(phantom)) >= 5  # air, rim, tissue and several structures


def test_the_default_images_are_the_ones_runs_had_before_the_families():
    # Digests of Shepp-Logan and the astronaut at 32 pixels, as set up before `image` existed.
    ct = setup_problem("tomography_2d", image_size=32, projector="torch")
    superres = setup_problem("multiframe_superres", image_size=32)
    assert array_digest(ct.x_true) == \
        "b7611b13b7c0a55d0c473522281c7e1656dcc8c04df40a1f72a8510c8ca2bb31"
    assert array_digest(superres.x_true) == \
        "a6657a4c7bad50c7f61f159121abfacce8875fe214eb13508dd55a0e10897a23"


@pytest.mark.parametrize("problem", FAMILIES)
def test_splits_are_disjoint_members_of_the_family(problem):
    family = image_family(problem)
    validation, test = split_images(problem, "validation"), split_images(problem, "test")
    assert (len(validation), len(test)) == (2, 4)
    assert not set(validation) & set(test)
    assert all(split_of(problem, name) == "validation" for name in validation)
    assert all(split_of(problem, name) == "test" for name in test)
    assert family.default in test  # the image the report shows is never tuned on
    assert split_of(problem, f"{family.seeded}-7") is None  # in the family, in no split


def test_a_split_name_outside_the_two_is_refused():
    with pytest.raises(ConfigError, match="unknown split 'train' \\(allowed: validation, "
                                          "test\\)"):
        split_images("tomography_2d", "train")
    assert SPLITS == ("validation", "test")


@pytest.mark.parametrize(("problem", "name"), [
    ("tomography_2d", "lena"), ("tomography_2d", "phantom-01"), ("tomography_2d", "phantom--1"),
    ("tomography_2d", "astronaut"), ("multiframe_superres", "phantom-1"),
    ("multiframe_superres", "camera"), ("radio_interferometry", "shepp_logan")])
def test_a_name_outside_the_family_is_refused_in_one_line(problem, name):
    family = image_family(problem)
    with pytest.raises(ConfigError) as error:
        split_of(problem, name)
    assert str(error.value) == \
        f"dataset '{problem}': unknown image '{name}' (allowed: {family.forms()})"


@pytest.mark.parametrize(("problem", "image", "allowed"), [
    ("tomography_2d", "phantom-x", "shepp_logan, phantom-<n> for n >= 0"),
    ("multiframe_superres", "lena", "astronaut, chelsea, coffee, rocket, immunohistochemistry, "
                                    "hubble_deep_field, retina, synthetic-<n> for n >= 0")])
def test_a_config_naming_an_image_outside_the_family_is_refused(write_config, problem, image,
                                                                 allowed):
    experiment = tiny_experiment(dataset=[{problem: {"image_size": 32, "image": image}}])
    with pytest.raises(ConfigError) as error:
        load_config(write_config(experiment))
    assert str(error.value) == f"dataset '{problem}': unknown image '{image}' (allowed: " \
                               f"{allowed})"


def test_a_config_naming_images_of_the_family_is_accepted(write_config):
    images = ["shepp_logan", "phantom-3", "phantom-101"]
    experiment = tiny_experiment(dataset=[{"tomography_2d": {"image_size": 32,
                                                             "image": images}}])
    loaded = load_config(write_config(experiment))
    assert [values["image"] for values in loaded.datasets[0].combinations()] == images


def test_a_name_sets_its_parameter_and_parameters_name_their_image():
    radio = image_family("radio_interferometry")
    assert radio.parameters("sky-101") == {"seed": 101}
    assert image_family("tomography_2d").parameters("phantom-3") == {"image": "phantom-3"}
    assert image_of("radio_interferometry", {"seed": 2}) == "sky-2"
    assert image_of("radio_interferometry", {"seed": 2, "sky_fits": "m31.fits"}) is None
    assert image_of("tomography_2d", {}) == "shepp_logan"
    assert image_of("multiframe_superres", {"image": "coffee"}) == "coffee"


# Config hashes of a 2-iteration run of the default 32-pixel problems, computed by the code
# before `image` existed (ProblemSetup.source through rank.stamping.experiment_config).
DEFAULT_HASHES = {
    "tomography_2d": ({"projector": "torch"},
                      "909cb3a1d2c41357c3c77d7031fcd556d107519a8a31e30608b89c8d6861e5ee"),
    "multiframe_superres": ({},
                            "31b534472bac715ba22133b8d1e43b92ae415f8a19d9cfc8f441fad6fb3825d7"),
    "radio_interferometry": ({},
                             "e8c794571f2fa9a2d1f0287ed1407d5f2107b031d6cb3c7dd7df235b399d5fcd"),
}


def _hash(problem: str, **params) -> tuple[str, dict]:
    source = setup_problem(problem, image_size=32, **params).source
    config = experiment_config(source, "pgd", {"max_iter": 2, "seed": 0},
                               "benchmark_inference", "inference")
    return config_hash(canonical_json(config)), source["params"]


@pytest.mark.parametrize("problem", sorted(DEFAULT_HASHES))
def test_the_default_image_keeps_today_s_config_hash(problem):
    params, expected = DEFAULT_HASHES[problem]
    assert _hash(problem, **params)[0] == expected
    default = image_family(problem).parameters(image_family(problem).default)
    assert _hash(problem, **params, **default)[0] == expected  # named or not: one hash


@pytest.mark.parametrize(("problem", "image"), [("tomography_2d", "phantom-3"),
                                                ("multiframe_superres", "synthetic-1")])
def test_another_image_enters_the_record_and_the_hash(problem, image):
    params, expected = DEFAULT_HASHES[problem]
    digest, recorded = _hash(problem, **params, image=image)
    assert recorded["image"] == image
    assert digest != expected


def test_archived_ct_rows_record_the_dataset_as_today_s_code_does():
    # A CT run written before `image` existed (tests/fixtures): today's set-up of its dataset
    # parameters records exactly its stored dataset, so its config hashes as it did.
    import pandas as pd

    rows = pd.read_parquet(REPO / "tests" / "fixtures" / "old_parameter_names.parquet")
    configs = [json.loads(text) for text in rows["prov_config_json"].unique()]
    stored = next(c["dataset"] for c in configs if c["dataset"]["name"] == "tomography_2d")
    assert setup_problem("tomography_2d", **stored["params"]).source == stored


def test_expanded_experiment_ids_are_unchanged_without_an_image(write_config, tmp_path):
    experiment = {"dataset": [{"tomography_2d": {"image_size": 32, "projector": "torch"}},
                              {"multiframe_superres": {"image_size": 32}}],
                  "solver": [{"pnp": {"algorithm": "pgd", "max_iter": 2}}]}
    ids = [e["id"] for e in expand(write_config(experiment), 1, tmp_path / "expanded")]
    assert ids == ["e339be02a7726b6f", "d3b14366e881e183"]  # computed before `image` existed
