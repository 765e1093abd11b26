"""A configuration run on several images, read as one by the report and ``compare``: the key of
a configuration without its image, its figures over the images (mean, standard deviation,
lowest-highest), and ``--per-image`` showing them one per image as before."""

from __future__ import annotations

import json
import statistics

import pandas as pd
import pytest

from provenance.canonical import canonical_json, config_hash
from scalebench.cli import main
from scalebench.results.report.data import RUN, Results, load_results
from scalebench.results.report.methods import methods
from scalebench.results.report.over_images import images_of, without_image_key
from scalebench.results.report.summary import best_quality_lines

# Per image, each method's PSNR over iterations 0..3 (the best is the last).
PSNR = {"pgd": {"shepp_logan": 20.0, "phantom-1": 22.0, "phantom-2": 27.0},
        "drs": {"shepp_logan": 24.0, "phantom-1": 25.0, "phantom-2": 26.0}}


def _config(dataset: dict, algorithm: str) -> str:
    return canonical_json({"dataset": {"name": "tomography_2d", "params": dataset},
                           "solver": {"name": "pnp", "params": {"algorithm": algorithm}}})


def rows_of(images=("shepp_logan", "phantom-1", "phantom-2"), shift: float = 0.0,
            grad: float = 1.0) -> pd.DataFrame:
    """Two methods on ``images`` (the default image recorded as runs record it: no image)."""
    rows = []
    for algorithm, best in PSNR.items():
        for image in images:
            dataset = {"image_size": 32} | ({} if image == "shepp_logan" else {"image": image})
            config = _config(dataset, algorithm)
            for iteration in range(4):
                rows.append({
                    "solver_name": f"pnp[algorithm={algorithm}]", "p_solver_algorithm": algorithm,
                    "dataset_name": "tomography_2d[image_size=32"
                                    + ("" if image == "shepp_logan" else f",image={image}") + "]",
                    "p_dataset_image_size": 32,
                    "p_dataset_image": None if image == "shepp_logan" else image,
                    "objective_name": "imaging", "stop_val": iteration, "idx_rep": 0,
                    "time": iteration * grad,
                    "objective_psnr_db": best[image] + shift - 3 + iteration,
                    "objective_grad_time_s": grad, "prov_config_json": config,
                    "prov_config_hash": config_hash(config), "prov_world_size": 1,
                    "prov_torch_threads": 2, "prov_image_digest": "none",
                    "prov_result_sha256": f"{algorithm}{image}{iteration}"})
    return pd.DataFrame(rows)


def test_a_configuration_without_its_image_is_one_key_and_a_missing_image_the_default():
    rows = load_results_of(rows_of())
    assert images_of(rows).drop_duplicates().tolist() == ["shepp_logan", "phantom-1",
                                                          "phantom-2"]
    keys = without_image_key(rows).groupby(rows["p_solver_algorithm"]).nunique()
    assert keys.to_dict() == {"drs": 1, "pgd": 1}
    assert without_image_key(rows).nunique() == 2


def test_radio_names_its_seeds_skies_unless_a_fits_sky_replaces_them():
    def radio(seed, fits=None) -> dict:
        config = canonical_json({"dataset": {"name": "radio_interferometry", "params": {
            "seed": seed, "sky_fits": fits}}, "solver": {"name": "clean", "params": {}}})
        return {"dataset_name": "radio_interferometry", "solver_name": "clean",
                "prov_config_json": config, RUN: config}

    rows = pd.DataFrame([radio(0), radio(3), radio(0, "m31.fits"), radio(3, "m31.fits")])
    images = images_of(rows)
    assert images[:2].tolist() == ["sky-0", "sky-3"] and images[2:].isna().all()
    keys = without_image_key(rows).tolist()
    assert keys[0] == keys[1] and keys[2] != keys[3]  # a file's sky: the seed is its noise


def load_results_of(frame: pd.DataFrame) -> pd.DataFrame:
    return _results(frame).rows


def _results(frame: pd.DataFrame, per_image: bool = False) -> Results:
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "rows.parquet"
        frame.to_parquet(path)
        results = load_results([path])
    results.per_image = per_image
    return results


def test_the_methods_table_gives_a_configurations_mean_std_and_range_over_its_images():
    view = methods(_results(rows_of()))
    header, table = view.summary.header, view.summary.rows
    assert len(table) == 2 and "images" in header
    pgd = next(row for row in table if "algorithm=pgd" in row[2])
    values = list(PSNR["pgd"].values())
    assert pgd[header.index("images")] == "3"
    assert pgd[header.index("best (dB): mean ± std (lowest–highest)")] == (
        f"{statistics.fmean(values):.4g} ± {statistics.stdev(values):.2g} (20–27), 3 images")
    assert "image=" not in pgd[header.index("configuration")]
    per_image = methods(_results(rows_of(), per_image=True)).summary
    assert len(per_image.rows) == 6 and "best (dB)" in per_image.header


def test_the_best_line_names_the_best_mean_over_images_and_per_image_the_best_image():
    rows = _results(rows_of()).rows
    (line,) = best_quality_lines(rows)
    assert line.startswith("best mean PSNR over 3 images on tomography_2d: 25 ± 1 (24–26) dB")
    assert line.endswith("by pnp algorithm=drs")
    lines = best_quality_lines(rows, per_image=True)
    assert len(lines) == 3 and "image=phantom-2: 27 dB, by pnp algorithm=pgd" in lines[-1]


def test_compare_takes_the_images_as_the_samples_of_a_configuration(tmp_path, capsys):
    base, candidate = tmp_path / "base.parquet", tmp_path / "candidate.parquet"
    rows_of().to_parquet(base)
    rows_of(shift=-0.05, grad=3.0).assign(prov_torch_threads=1).to_parquet(candidate)
    assert main(["compare", str(base), str(candidate), "--format", "json"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert [e["images"] for e in found["experiments"]] == [[3, 3], [3, 3]]
    for experiment in found["experiments"]:
        measures = {m["measure"]: m for m in experiment["measures"]}
        # The images differ by several dB: a 0.05 dB drop is within their spread.
        assert measures["best PSNR"]["verdict"] == "same"
        assert measures["best PSNR"]["base_spread"] == pytest.approx(7.0 if "pgd" in
                                                                     experiment["experiment"]
                                                                     else 2.0)
        assert measures["grad (s/iteration)"]["verdict"] == "slower"
        assert experiment["bit_for_bit"] == "equal"
    # Image by image, one repetition a side: single runs, judged by the factor (3x slower)
    # and the quality tolerance in dB (0.05 dB lower: the same).
    assert main(["compare", str(base), str(candidate), "--per-image", "--format",
                 "json"]) == 1
    per_image = json.loads(capsys.readouterr().out)["experiments"]
    assert len(per_image) == 6
    for experiment in per_image:
        measures = {m["measure"]: m for m in experiment["measures"]}
        assert measures["grad (s/iteration)"]["verdict"] == "slower"
        assert measures["grad (s/iteration)"]["single_run"]
        assert measures["best PSNR"]["verdict"] == "same"
