"""Checks a first use meets, in-process: non-finite numbers, a refused connection, a local plan
whose ranks exceed the cores."""

from __future__ import annotations

import re
import socket

import pytest
import yaml

from scalebench.data.fetch import FetchError, fetch
from scalebench.data.manifest import Entry
from scalebench.errors import ConfigError
from scalebench.experiment.config import load_config
from scalebench.planning.jobs import Job, Plan
from tests.support.cli import tiny_experiment


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_non_finite_numbers_are_refused_naming_the_parameter(tmp_path, value):
    config = tmp_path / "nan.yml"
    config.write_text(yaml.safe_dump(tiny_experiment()).replace(
        "denoiser_sigma: 0.002", f"denoiser_sigma: {value}"))
    with pytest.raises(ConfigError, match="solver 'pnp': parameter 'denoiser_sigma' must be a "
                       "finite number, got (nan|inf|-inf)"):
        load_config(config)


def test_a_refused_connection_says_so(tmp_path):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    entry = Entry("test", "weights", "w.pth", f"http://127.0.0.1:{port}/w.pth", 3, "sha256",
                  "0" * 64, "the test", "test")
    with pytest.raises(FetchError) as error:
        fetch(entry, tmp_path / "w.pth")
    assert re.fullmatch(rf"test: cannot connect to http://127\.0\.0\.1:{port}/w\.pth "
                        r"\(connection refused\); .*", str(error.value)), str(error.value)
    assert not list(tmp_path.iterdir())


def _job(ranks: int, threads: int = 1) -> Job:
    return Job("0123456789abcdef", "tomography_2d x pnp", {}, {}, 1, ranks, ranks, 0, threads,
               None, None, None, ["scalebench", "run"])


def test_a_local_plan_warns_when_its_ranks_exceed_the_cores():
    plan = Plan("exp.yml", None, [_job(2), _job(8, threads=2)])
    warnings = plan.warnings(cores=4)
    assert len(warnings) == 1
    assert "needs 8 rank(s) x 2 thread(s) but this machine has 4 core(s)" in warnings[0]
    assert Plan("exp.yml", "submitit.yml", [_job(64)]).warnings(cores=4) == []
