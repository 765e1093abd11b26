"""Measurement tools run for real: the evaluation cost (a row per size, where it stopped) and
where a test run's CPU goes (each process logged with its test, the import floor)."""


import subprocess
import sys

from tests.support.paths import REPO


def test_evaluation_cost_prints_a_row_per_size_and_where_it_stopped():
    done = subprocess.run([sys.executable, str(REPO / "tools" / "evaluation_cost.py"),
                           "--sizes", "64,65536", "--repeats", "1", "--device", "cpu"],
                          capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    row = next(line.split() for line in lines if line.split()[:1] == ["64"])
    assert len(row) == 7 and float(row[3]) > 0 and float(row[2]) > 0  # iteration, evaluation
    assert any(line.startswith(" 65536 skipped: needs about") for line in lines)


def test_test_process_cost_logs_each_process_with_its_test_and_the_import_floor(tmp_path):
    (tmp_path / "test_starts.py").write_text(
        "import subprocess, sys\n\n\n"
        "def test_starts_a_torch_process():\n"
        "    subprocess.run([sys.executable, '-c', 'import torch'], check=True)\n\n\n"
        "def test_starts_a_light_process():\n"
        "    subprocess.run([sys.executable, '-c', 'pass'], check=True)\n")
    done = subprocess.run([sys.executable, str(REPO / "tools" / "test_process_cost.py"),
                           str(tmp_path / "test_starts.py"), "--workers", "0", "--repeats", "1"],
                          capture_output=True, text=True, check=False, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = {parts[3]: parts[:3] for parts in (line.split(None, 3)
                                              for line in done.stdout.splitlines())
            if len(parts) == 4 and parts[0].isdigit()}
    assert rows["-c import torch"][:2] == ["1", "1"] and float(rows["-c import torch"][2]) > 0
    assert rows["-c pass"][:2] == ["1", "0"]
    assert rows["-m pytest"][:2] == ["1", "0"]  # the run itself, which imports no torch
    tests = [line for line in done.stdout.splitlines() if "::test_starts_a" in line]
    assert tests[0].split()[0] == "1" and tests[0].endswith("::test_starts_a_torch_process")
    floor = next(line for line in done.stdout.splitlines() if line.startswith("import floor"))
    assert floor.startswith("import floor: 1 process(es) imported torch x ")
