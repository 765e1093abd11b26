"""What stays light, in a fresh interpreter: provenance never imports torch, and the checks of
a config (validate, expand, plan, capacity's answers) import neither torch nor deepinv nor
benchopt, so that a login node checks a campaign in a fraction of a second."""

import subprocess
import sys

import pytest

from tests.support.paths import REPO

HEAVY = ("torch", "deepinv", "benchopt", "matplotlib", "pandas")


def _loaded_after(code: str) -> list[str]:
    check = (f"import sys; {code}; "
             f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                            cwd=REPO, check=False)
    assert result.returncode == 0, result.stderr
    return [name for name in result.stdout.strip().split(",") if name]


def test_importing_and_collecting_never_imports_torch():
    assert "torch" not in _loaded_after("import provenance; provenance.collect()")


@pytest.mark.parametrize("module", ["scalebench.experiment.expand", "scalebench.experiment.plan",
                                    "scalebench.experiment.capacity.command",
                                    "scalebench.problems", "scalebench.loops"])
def test_the_checks_of_a_config_load_no_numerical_stack(module):
    assert _loaded_after(f"import {module}") == []


def test_validating_a_whole_config_loads_no_numerical_stack():
    code = ("from scalebench.experiment.config import load_experiment; "
            "load_experiment('configs/scaling/strong_scaling.yml', 8)")
    assert _loaded_after(code) == []
