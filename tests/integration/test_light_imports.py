"""What stays light, in a fresh interpreter: provenance never imports torch, and the checks of
a config (validate, expand, plan, capacity's answers) import neither torch nor deepinv nor
benchopt, so that a login node checks a campaign in a fraction of a second."""

import pytest

from tests.support.cli import modules_loaded_after, tiny_experiment, write_experiment

HEAVY = ("torch", "deepinv", "benchopt", "matplotlib", "pandas")


def test_importing_and_collecting_never_imports_torch():
    assert "torch" not in modules_loaded_after(
        "import provenance; assert provenance.collect()['complete']", HEAVY)


@pytest.mark.parametrize("module", ["scalebench.experiment.expand", "scalebench.planning.plan",
                                    "scalebench.planning.capacity.command",
                                    "scalebench.problems", "scalebench.loops"])
def test_the_checks_of_a_config_load_no_numerical_stack(module):
    assert modules_loaded_after(f"import {module}", HEAVY) == []


def test_validating_a_whole_config_loads_no_numerical_stack():
    code = ("from scalebench.experiment.config import load_config; "
            "load_config('configs/scaling/strong_scaling.yml', 8)")
    assert modules_loaded_after(code, HEAVY) == []


def test_predicting_a_launchs_time_and_what_the_norm_cache_holds_loads_no_numerical_stack(
        tmp_path):
    """What the expand child computes for `scalebench run` (launch_time_checks) and the norm
    cache's torch-free key (Configuration.norm_run_key, norm_lookup.norm_cached), for a CPU
    config (a device 'auto' asks torch whether CUDA is there)."""
    config = write_experiment(tmp_path, tiny_experiment())
    code = ("import tempfile; from pathlib import Path; "
            "from scalebench.experiment.config import load_config; "
            "from scalebench.experiment.expand import expand_config; "
            "from scalebench.planning.plan_time import experiment_prediction, "
            "launch_time_checks; "
            "from scalebench.planning.capacity.configuration import Configuration; "
            "from scalebench.data.norm_lookup import norm_cached; "
            f"g = load_config({str(config)!r}, 1); "
            "es = expand_config(g, Path(tempfile.mkdtemp())); "
            "[e.update(predicted=experiment_prediction(e, 1, 1, set())) for e in es]; "
            "launch_time_checks(g, es); "
            "norm_cached(Configuration('tomography_2d', {'image_size': 64}, 'pnp', "
            "{'device': 'cpu'}, 'image_size').norm_run_key())")
    assert modules_loaded_after(code, HEAVY) == []


def test_reading_results_and_writing_the_closing_lines_load_no_matplotlib():
    """The launcher's publish child (after every experiment) merges and summarises results
    and draws nothing; only the report's figures import matplotlib."""
    code = ("from scalebench.results.store import publish; "
            "from scalebench.results.report.data import load_results; "
            "from scalebench.results.report.summary import closing_lines; "
            "import scalebench.results.report, scalebench.results.compare")
    assert modules_loaded_after(code, HEAVY) == ["pandas"]
