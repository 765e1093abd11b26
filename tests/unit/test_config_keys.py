"""scalebench's own config keys (scalebench.experiment.scalebench_keys): checked, on the
Config, never in benchopt's experiment configs; and a config read from disk once by plan
and by capacity."""

from __future__ import annotations

from pathlib import Path

import yaml

from scalebench.experiment.config import load_config
from scalebench.experiment.expand import expand
from scalebench.experiment.scalebench_keys import SCALEBENCH_KEYS
from tests.support.plans import config_file, plan_of


def test_scalebench_keys_are_checked_and_kept_from_benchopt(tmp_path):
    config = config_file(tmp_path, **{"restart-limit": 2,
                                      "tune": {"denoiser_sigma": [0.001, 0.01]},
                                      "tuned": {"study": {"trial": 3}}})
    checked = load_config(config)
    assert checked.scalebench == {"restart-limit": 2,
                                  "tune": {"denoiser_sigma": [0.001, 0.01]},
                                  "tuned": {"study": {"trial": 3}}}
    experiments = expand(config, 1, tmp_path / "experiments")
    for experiment in experiments:
        written = yaml.safe_load(Path(experiment["config"]).read_text())
        assert not set(written) & set(SCALEBENCH_KEYS)
        assert not set(experiment["options"]) & set(SCALEBENCH_KEYS)
        assert written["max-runs"] == 100  # benchopt's own options stay


def test_a_config_without_them_gets_their_defaults(tmp_path):
    assert load_config(config_file(tmp_path)).scalebench == \
        {"restart-limit": 3, "tune": None, "tuned": None}


def counted_reads(monkeypatch, path: Path) -> list[Path]:
    """The reads of ``path``'s text from now on (every YAML reader reads it so)."""
    reads = []
    read_text = Path.read_text

    def counting(self, *args, **kwargs):
        if self.resolve() == path.resolve():
            reads.append(self)
        return read_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", counting)
    return reads


def test_plan_reads_the_config_once(tmp_path, monkeypatch):
    config = config_file(tmp_path)
    reads = counted_reads(monkeypatch, config)
    assert len(plan_of(config).jobs) == 2
    assert len(reads) == 1


def test_capacity_lists_its_experiments_from_one_read(tmp_path, monkeypatch):
    from scalebench.planning.capacity.experiments import configurations

    config = config_file(tmp_path)
    reads = counted_reads(monkeypatch, config)
    assert len(configurations(config, 1, "image_size", None)) == 2
    assert len(reads) == 1
