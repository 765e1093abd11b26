"""Runs of one configuration on several images read as one: per row the image it ran on and
the key of its configuration without its image, the rule the report and ``compare`` share.

The image is the dataset's image parameter (``scalebench.problems.images``: ``image`` for 2D
CT and super-resolution, ``seed`` for radio, whose seed draws the noise too). A run that names
none ran its family's default image: rows written before the parameter existed, and runs of the
default image, which keep their old config hash, record no image. A radio sky read from a FITS
file is no image of the family: its seed stays part of the configuration. Datasets without a
family (a measured scan, a folder's files) run one image, named None. Imports no torch.
"""

from __future__ import annotations

import json
import re

import pandas as pd

from provenance.canonical import canonical_json, config_hash
from provenance.schema import column
from scalebench.benchmarks import problem_spec
from scalebench.problems.images import ImageFamily
from scalebench.results.report.data import RUN, experiment_key
from scalebench.statistics import Summary, summary

CONFIG_JSON = column("config_json")


def _family(dataset_name: str) -> ImageFamily | None:
    spec = problem_spec(dataset_name)
    return spec.images if spec is not None else None


def _image(family: ImageFamily | None, params: dict) -> str | None:
    """The image of the family that dataset parameters ``params`` (as recorded) ran."""
    if family is None:
        return None
    if family.replaced_by is not None and pd.notna(params.get(family.replaced_by)):
        return None
    value = params.get(family.parameter)
    if value is None or pd.isna(value):
        return family.default
    return family.name_of({family.parameter: int(value) if family.parameter == "seed"
                           else value})


def _recorded(row: pd.Series) -> tuple[str, dict, dict | None]:
    """(dataset name, its recorded parameters, the config) of a run's first row: its config
    JSON where recorded, else its benchopt parameter columns."""
    if CONFIG_JSON in row and isinstance(row[CONFIG_JSON], str):
        config = json.loads(row[CONFIG_JSON])
        return config["dataset"]["name"], dict(config["dataset"]["params"]), config
    params = {c.removeprefix("p_dataset_"): v for c, v in row.items()
              if str(c).startswith("p_dataset_") and pd.notna(v)}
    return str(row["dataset_name"]).split("[")[0], params, None


def _without_image(row: pd.Series) -> tuple[str | None, str]:
    """(image, key of the configuration without it) of one run's first row."""
    name, params, config = _recorded(row)
    family = _family(name)
    image = _image(family, params)
    if config is not None:
        if image is not None:
            config["dataset"]["params"].pop(family.parameter, None)
        return image, config_hash(canonical_json(config))[:16]
    key = f"{row['dataset_name']} x {row['solver_name']}"
    if image is not None:  # benchopt's names list every parameter: the image's left out
        key = re.sub(rf"(?<=[\[,]){re.escape(family.parameter)}=[^,\]]*,?", "", key)
    return image, key


def _per_run(rows: pd.DataFrame) -> pd.DataFrame:
    """Per run (indexed by run): its image and its configuration key without the image."""
    first = rows.groupby(RUN, sort=False).first()
    found = [_without_image(row) for _, row in first.iterrows()]
    return pd.DataFrame(found, index=first.index, columns=["image", "configuration"])


def images_of(rows: pd.DataFrame) -> pd.Series:
    """Per row of ``rows`` (with RUN), the image its run ran on (missing: a dataset without
    an image family, or a sky read from a file)."""
    return rows[RUN].map(_per_run(rows)["image"])


def without_image_key(rows: pd.DataFrame) -> pd.Series:
    """Per row, the experiment without its image: ``experiment_key``'s config hash taken over
    the config without its image parameter, with the world size."""
    key = rows[RUN].map(_per_run(rows)["configuration"])
    if "prov_world_size" in rows:
        key = key + "/ranks" + rows["prov_world_size"].astype(str)
    return key


def image_series(rows: pd.DataFrame) -> pd.Series:
    """Per row, its run without the image: the same configuration, repetition, world size and
    environment on any image is one series (``RUN`` with ``experiment_key`` replaced by
    ``without_image_key``)."""
    experiments, without = experiment_key(rows), without_image_key(rows)
    return pd.Series([key + run[len(experiment):] for key, run, experiment in
                      zip(without, rows[RUN], experiments, strict=True)], index=rows.index)


def image_columns(rows: pd.DataFrame) -> tuple[str, ...]:
    """The parameter columns of ``rows`` that name an image (a label over images leaves them
    out)."""
    families = {_family(name) for name in rows["dataset_name"].unique()} - {None}
    return tuple(sorted({f"p_dataset_{family.parameter}" for family in families}
                        & set(rows.columns)))


def over_images(values: pd.Series, images: pd.Series) -> Summary:
    """The Summary over images of per-run ``values`` (indexed like ``images``, the image of
    each run): each image's mean over its repetitions is one figure."""
    per_image = values.groupby(images.fillna(""), sort=False).mean()
    return summary(per_image.tolist())


def several_images(series: pd.Series, images: pd.Series) -> bool:
    """Whether any series of ``series`` (per run or row, with ``images`` alike) spans more
    than one image."""
    frame = pd.DataFrame({"series": series, "image": images.fillna("")})
    return bool((frame.groupby("series")["image"].nunique() > 1).any())


def images_text(figures: Summary, digits: int = 4) -> str:
    """A figure over images for a table: 'mean ± std (lowest–highest), n images', the figure
    alone for one image."""
    if figures.count < 2:
        return figures.mean_text(digits)
    return f"{figures.mean_text(digits)}, {figures.count} images"
