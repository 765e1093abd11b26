"""A run of an image of a family, end to end: `scalebench run` records the image on its rows
and in their hashed config, `scalebench replay` re-runs it bit for bit, and `scalebench
validate` refuses an image outside the family in one line."""

import json
import math

import pandas as pd

from tests.support.cli import copy_benchmark, run_cli, tiny_experiment


def test_a_run_of_a_seeded_phantom_records_it_and_replays(tmp_path, write_config):
    benchmark = copy_benchmark(tmp_path)
    experiment = tiny_experiment(
        dataset=[{"tomography_2d": {"image_size": 32, "num_angles": 12, "image": "phantom-3"}}],
        solver=[{"pnp": {"max_iter": 2, "device": "cpu"}}])
    result = run_cli("run", write_config(experiment), "--benchmark", benchmark,
                     "--output", "phantom", "--no-html")
    assert result.returncode == 0, result.stderr[-2000:]
    results = benchmark / "outputs" / "phantom.parquet"
    rows = pd.read_parquet(results)
    assert rows.stop_val.tolist() == [0, 1, 2]
    assert (rows.p_dataset_image == "phantom-3").all()
    config = json.loads(rows.prov_config_json.iloc[0])
    assert config["dataset"]["params"]["image"] == "phantom-3"
    assert rows.objective_psnr_db.map(math.isfinite).all()
    replayed = run_cli("replay", results, "--benchmark", benchmark)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr[-2000:]
    verdicts = [line for line in replayed.stdout.splitlines()
                if line.startswith(("MATCH", "DIFF", "REFUSED"))]
    assert len(verdicts) == 1 and verdicts[0].startswith("MATCH"), replayed.stdout


def test_validate_refuses_an_image_outside_the_family_in_one_line(write_config):
    experiment = tiny_experiment(dataset=[{"tomography_2d": {"image": "lena"}}])
    result = run_cli("validate", write_config(experiment))
    assert result.returncode == 2
    assert result.stderr.strip() == ("scalebench: error: dataset 'tomography_2d': unknown "
                                     "image 'lena' (allowed: shepp_logan, phantom-<n> for "
                                     "n >= 0)")
