"""What stays light, in a fresh interpreter: provenance never imports torch, and the checks of
a config (validate, expand, plan, capacity's answers) import neither torch nor deepinv nor
benchopt, so that a login node checks a campaign in a fraction of a second."""

import pytest

from tests.support.cli import modules_loaded_after

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
