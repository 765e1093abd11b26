"""Bad experiment files are refused in one line, before anything runs."""

import pytest

from scalebench.benchmarks import BENCHMARKS, INFERENCE
from scalebench.errors import ConfigError
from scalebench.experiment.config import load_config
from tests.support.cli import tiny_experiment
from tests.support.paths import REPO


def _with_dataset(**params):
    return tiny_experiment(dataset=[{"tomography_2d": params}])


def _with_solver(**params):
    return tiny_experiment(solver=[{"pnp": params}])


BAD_EXPERIMENTS = [
    (tiny_experiment(dataset=["walnut_4d"]), "unknown dataset 'walnut_4d' \\(allowed: "
     f"{', '.join(sorted(INFERENCE.problems))}\\)"),
    (tiny_experiment(solver=["admm"]),
     f"unknown solver 'admm' \\(allowed: {', '.join(sorted(INFERENCE.solvers))}\\)"),
    (_with_dataset(image_size=32, angles=5), "dataset 'tomography_2d': unknown parameter "
     "'angles' \\(allowed: image, image_size, noise_level, num_angles, num_operators, "
     "projector, seed\\)"),
    (_with_dataset(image_size="big"), "parameter 'image_size' must be an integer >= 16, "
     "got 'big' \\(str\\)"),
    (_with_dataset(image_size=[32, 40.5]), "'image_size' must be an integer >= 16, got 40.5"),
    (_with_solver(max_iter=[]), "solver 'pnp': parameter 'max_iter' has an empty list of "
     "values"),
    (_with_solver(max_iter=True), "'max_iter' must be an integer >= 1, got True \\(bool\\)"),
    (_with_solver(init="random"), "'init' must be one of 'zeros', 'adjoint', "
     "'pseudo_inverse', 'dirty', got 'random'"),
    (_with_solver(denoiser="nlm"), "'denoiser' must be one of 'tv', 'drunet', 'dncnn', "
                                  "'wavelet', 'bm3d'"),
    (_with_solver(denoiser="drunet", max_iter=1), "solver 'pnp' on dataset 'tomography_2d': "
     "denoiser 'drunet' needs image sides divisible by 8, got inputs of 36x36"),
    (_with_solver(denoiser="drunet", tile_size=30, tile_overlap=3), "needs windows \\(tile_size "
     "\\+ 2 \\* tile_overlap, or the image side\\) divisible by 8, got inputs of 36x36"),
    (_with_solver(denoiser="dncnn", pretrained="/no/such/weights.pth"),
     "weights file not found: /no/such/weights.pth"),
    (_with_solver(max_iter=150), "max_iter=150 with eval_every=1 records 151 rows but "
     "max-runs is 100"),
    (_with_solver(max_iter=300, eval_every=2), "max_iter=300 with eval_every=2 records 151 "
     "rows"),
    (_with_solver(eval_every=0), "'eval_every' must be an integer >= 1, got 0"),
    (tiny_experiment(**{"parallel-config": "configs/scaling/submitit.yml"}),
     "config key 'parallel-config' hands runs to benchopt's parallel backend"),
    (tiny_experiment(solver=["pnp[5]"]), "name each parameter"),
    (_with_solver(device="tpu"), "'device' must be one of 'auto', 'cpu', 'cuda'"),
    (tiny_experiment(**{"max_runs": 5}), "unknown config key 'max_runs'"),
    (tiny_experiment(timeout="soon"), "run option 'timeout': 'soon' is not a positive duration "
     "\\(give a number with a unit s, min, h or d \\(90min, 2h30m, 1d\\), MM:SS, HH:MM:SS or "
     "D-HH:MM:SS; a bare number counts seconds\\)"),
    (tiny_experiment(**{"restart-limit": -1}), "config: parameter 'restart-limit' must be an "
     "integer >= 0, got -1"),
    (tiny_experiment(**{"restart-limit": "often"}), "'restart-limit' must be an integer >= 0, "
     "got 'often'"),
    (tiny_experiment(tune=["sigma"]), "config: 'tune' must be a mapping of parameter names"),
    (tiny_experiment(solver=[]), "config key 'solver' must be a non-empty list"),
    (tiny_experiment(objective=["least_squares"]), "objective must be "
     "'imaging_inverse_problem'"),
    (tiny_experiment(dataset=[{"tomography_2d": {"num_angles": 3, "num_operators": 4}}]),
     "num_operators \\(4\\) must not exceed num_angles \\(3\\)"),
]


@pytest.mark.parametrize(("experiment", "message"), BAD_EXPERIMENTS)
def test_bad_experiment_is_refused_with_a_precise_message(write_config, experiment, message):
    if "36x36" in message:
        experiment["dataset"] = [{"tomography_2d": {"image_size": 36}}]
    with pytest.raises(ConfigError, match=message) as error:
        load_config(write_config(experiment))
    assert "\n" not in str(error.value)


def test_unreadable_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "missing.yml")
    broken = tmp_path / "broken.yml"
    broken.write_text("dataset: [tomography_2d\nsolver: {")
    with pytest.raises(ConfigError, match="is not valid YAML"):
        load_config(broken)
    scalar = tmp_path / "scalar.yml"
    scalar.write_text("42\n")
    with pytest.raises(ConfigError, match="must be a mapping of keys, got int"):
        load_config(scalar)


def test_valid_grid_is_accepted(write_config):
    experiment = _with_dataset(image_size=[32, 64], num_angles=[8, 16])
    loaded = load_config(write_config(experiment))
    assert len(loaded.datasets[0].combinations()) == 4


SHIPPED = sorted(str(p.relative_to(REPO)) for p in (REPO / "configs").rglob("*.yml")
                 if p.name != "submitit.yml")


def test_every_shipped_experiment_is_checked():
    assert {"configs/default.yml", "configs/scaling/strong_scaling.yml"} <= set(SHIPPED)


@pytest.mark.parametrize("path", SHIPPED)
def test_shipped_configs_are_valid(path, many_views_walnut_cache, monkeypatch):
    # walnut_conebeam reads the cache, and checks the views against the fetched scan's
    monkeypatch.setenv("SCALEBENCH_CACHE", str(many_views_walnut_cache))
    load_config(REPO / path)


def test_zipped_keys_pair_their_values(write_config):
    experiment = _with_dataset(**{"image_size, num_angles": [[32, 8], [64, 16]]})
    loaded = load_config(write_config(experiment))
    assert loaded.datasets[0].combinations() == [{"image_size": 32, "num_angles": 8},
                                                 {"image_size": 64, "num_angles": 16}]
    bad = _with_dataset(**{"image_size, num_angles": [[32, 8, 1]]})
    with pytest.raises(ConfigError, match="each value must be a list of 2 values"):
        load_config(write_config(bad))


def test_configs_benchopt_accepts_are_accepted(write_config):
    """No objective key, names in another case, bracketed parameters, benchopt's own
    options, a single entry without a list, force-solver: benchopt runs all of these."""
    experiment = tiny_experiment(
        dataset={"Tomography_2D": {"image_size": 32, "num_angles": 12}},
        solver=["PnP[max_iter=3,device=cpu,denoiser_sigma=0.002]"],
        **{"force-solver": ["Denoiser[max_iter=2]"], "plot": False, "n-jobs": 1,
           "seed": 3, "output": "ignored"})
    del experiment["objective"]
    loaded = load_config(write_config(experiment))
    assert [d.name for d in loaded.datasets] == ["tomography_2d"]
    assert [s.name for s in loaded.solvers] == ["pnp", "denoiser"]
    assert loaded.solvers[0].combinations() == [{"max_iter": 3, "device": "cpu",
                                                 "denoiser_sigma": 0.002}]


def test_missing_sections_mean_every_dataset_and_solver(write_config, many_views_walnut_cache,
                                                        monkeypatch):
    # walnut_conebeam's defaults (60 views) are checked against the fetched scan
    monkeypatch.setenv("SCALEBENCH_CACHE", str(many_views_walnut_cache))
    experiment = {"max-runs": 100}
    loaded = load_config(write_config(experiment))
    assert sorted(d.name for d in loaded.datasets) == sorted(INFERENCE.problems)
    # fbp and clean apply to one dataset each: not to every one listed
    solvers = INFERENCE.solvers
    assert sorted(s.name for s in loaded.solvers) == sorted(
        name for name, spec in solvers.items() if not spec.datasets)
    only_ct = load_config(write_config({"max-runs": 100, "dataset": ["tomography_2d"]}))
    assert sorted(s.name for s in only_ct.solvers) == sorted(
        name for name, spec in solvers.items() if spec.applies_to("tomography_2d"))
    assert "fbp" in {s.name for s in only_ct.solvers} - {s.name for s in loaded.solvers}


def test_a_baseline_beside_other_datasets_runs_on_those_it_applies_to(write_config, tmp_path):
    """fbp listed with a CT and a super-resolution dataset: one experiment per fbp filter on
    the CT, none on the other; cgls (every dataset) on both; alone with the other, refused."""
    from scalebench.experiment.expand import expand

    experiment = tiny_experiment(
        dataset=[{"tomography_2d": {"image_size": 32}}, {"synthetic": {"image_size": 32}}],
        solver=[{"fbp": {"filter": ["ram-lak", "hann"]}}, {"cgls": {"max_iter": 3}}])
    config = write_config(experiment)
    loaded = load_config(config)
    assert not loaded.runs("fbp", "synthetic") and loaded.runs("fbp", "tomography_2d")
    pairs = [(next(iter(e["dataset"])), next(iter(e["solver"])))
             for e in expand(config, 1, tmp_path / "expanded")]
    assert pairs == [("tomography_2d", "fbp"), ("tomography_2d", "fbp"),
                     ("tomography_2d", "cgls"), ("synthetic", "cgls")]
    alone = tiny_experiment(dataset=[{"synthetic": {"image_size": 32}}],
                            solver=[{"fbp": {}}])
    with pytest.raises(ConfigError, match="solver 'fbp' on dataset 'synthetic': does not "
                                          "apply"):
        load_config(write_config(alone, "alone.yml"))


def test_eval_every_lowers_the_evaluations_max_runs_must_hold(write_config):
    experiment = _with_solver(max_iter=300, eval_every=3)  # 0, 3, ..., 300: 101 evaluations
    experiment["max-runs"] = 101
    load_config(write_config(experiment))


@pytest.mark.parametrize("objective", sorted(BENCHMARKS))
def test_each_benchmark_has_a_file_for_every_dataset_and_solver_its_configs_may_name(
        objective):
    """Validation and the benchmark folder agree: no config passes validation only to name a
    dataset or solver that benchopt cannot find in the folder (nor the other way round)."""
    rules = BENCHMARKS[objective]
    folder = rules.path
    assert sorted(p.stem for p in (folder / "datasets").glob("*.py")) == sorted(rules.problems)
    assert sorted(p.stem for p in (folder / "solvers").glob("*.py")) == sorted(rules.solvers)


def test_a_training_config_naming_an_inference_only_dataset_is_refused(write_config):
    experiment = {"objective": ["supervised_training"],
                  "dataset": [{"radio_interferometry": {}}], "solver": ["unrolled_pgd"]}
    with pytest.raises(ConfigError, match="unknown dataset 'radio_interferometry'"):
        load_config(write_config(experiment))
