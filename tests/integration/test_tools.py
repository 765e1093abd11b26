"""Measurement tools run for real, as `python -m tools.NAME` from the repository root: every
tool's --help, the evaluation cost (a row per size, where it stopped) and where a test run's
CPU goes (each process logged with its test, the import floor)."""

import json
import subprocess
import sys

import yaml

from tests.support.paths import REPO

TOOLS = sorted(path.stem for path in (REPO / "tools").glob("*.py")
               if path.stem not in ("__init__", "measuring"))
# Each tool run as `python -m` runs it (runpy, as __main__, sys.argv its own) with --help, in
# one process: the stack imported once instead of once a tool.
EVERY_HELP = """
import contextlib, io, json, runpy, sys
answers = {}
for name in sys.argv[1:]:
    sys.argv, out = [f"tools/{name}.py", "--help"], io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_module(f"tools.{name}", run_name="__main__", alter_sys=True)
        answers[name] = ["no exit", out.getvalue()]
    except SystemExit as exit:
        answers[name] = [exit.code, out.getvalue()]
print(json.dumps(answers))
"""


def run_tool(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", f"tools.{name}", *args], cwd=REPO,
                          capture_output=True, text=True, check=False, timeout=600)


def table_rows(text: str) -> list[list[str]]:
    """The cells of the markdown rows of ``text``: the header's, then the rows' (not the
    separator line's)."""
    return [[cell.strip() for cell in line.strip()[1:-1].split(" | ")]
            for line in text.splitlines() if line.startswith("| ")]


def test_every_tool_answers_help_with_its_module_command():
    done = subprocess.run([sys.executable, "-c", EVERY_HELP, *TOOLS], cwd=REPO,
                          capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    answers = json.loads(done.stdout.splitlines()[-1])
    assert sorted(answers) == TOOLS and len(TOOLS) > 20  # the glob found the tools
    for name, (code, text) in answers.items():
        assert code in (0, None), (name, code)
        assert text.startswith(f"usage: python -m tools.{name}"), (name, text[:200])


def test_a_tool_runs_as_a_module_from_the_repository_root():
    done = run_tool("miniature_walnut", "--help")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage: python -m tools.miniature_walnut [-h] cache_folder")


def test_evaluation_cost_prints_a_row_per_size_and_where_it_stopped():
    done = run_tool("evaluation_cost", "--sizes", "64,65536", "--repeats", "1",
                    "--device", "cpu")
    assert done.returncode == 0, done.stderr[-2000:]
    rows = table_rows(done.stdout)
    assert rows[0][:7] == ["size", "image MiB", "iter s", "eval s", "eval/iter",
                           "host extra MiB", "x image"]
    row = next(cells for cells in rows if cells[0] == "64")
    assert len(row) == len(rows[0]) and float(row[3]) > 0 and float(row[2]) > 0
    assert any(cells[0] == "65536" and cells[1].startswith("skipped: needs about")
               for cells in rows)


def test_test_process_cost_logs_each_process_with_its_test_and_the_import_floor(tmp_path):
    (tmp_path / "test_starts.py").write_text(
        "import subprocess, sys\n\n\n"
        "def test_starts_a_torch_process():\n"
        "    subprocess.run([sys.executable, '-c', 'import torch'], check=True)\n\n\n"
        "def test_starts_a_light_process():\n"
        "    subprocess.run([sys.executable, '-c', 'pass'], check=True)\n")
    done = run_tool("test_process_cost", str(tmp_path / "test_starts.py"), "--workers", "0",
                    "--repeats", "1")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = table_rows(done.stdout)
    kinds = {cells[3]: cells[:3] for cells in rows if len(cells) == 4 and cells[0].isdigit()}
    assert kinds["-c import torch"][:2] == ["1", "1"] and float(kinds["-c import torch"][2]) > 0
    assert kinds["-c pass"][:2] == ["1", "0"]
    assert kinds["-m pytest"][:2] == ["1", "0"]  # the run itself, which imports no torch
    tests = [cells for cells in rows if len(cells) == 3 and "::test_starts_a" in cells[2]]
    assert tests[0][0] == "1" and tests[0][2].endswith("::test_starts_a_torch_process")
    floor = next(line for line in done.stdout.splitlines() if line.startswith("import floor"))
    assert floor.startswith("import floor: 1 process(es) imported torch x ")


def test_superres_scaling_measures_each_size_in_a_child_process():
    done = run_tool("superres_scaling", "--sizes", "64", "--frames", "2",
                    "--deepinv-max-size", "64")
    assert done.returncode == 0, done.stderr[-2000:]
    header, row = table_rows(done.stdout)
    assert header[0] == "size" and row[0] == "64²" and len(row) == len(header)
    assert float(row[4]) > 0 and float(row[7]) > float(row[6])  # deepinv stores more


def test_replay_overhead_launches_a_config_and_replays_its_rows(tmp_path):
    config = tmp_path / "tiny.yml"
    config.write_text(yaml.safe_dump({
        "objective": ["imaging_inverse_problem"],
        "dataset": [{"synthetic": {"image_size": 32, "task": "denoising"}}],
        "solver": [{"pnp": {"denoiser": "tv", "max_iter": 2, "device": "cpu"}}],
        "max-runs": 3, "timeout": "10m"}))
    done = run_tool("replay_overhead", "--config", str(config))
    assert done.returncode == 0, done.stderr[-2000:]
    report = yaml.safe_load(done.stdout)
    assert report["run_wall_s"] > 0 and report["replay_wall_s"] > 0
    assert [verdict.split()[0] for verdict in report["verdicts"]] == ["MATCH"]
