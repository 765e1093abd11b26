"""Progress lines (scalebench.launch.progress): a line per stage and per tenth of the run, and
the last iteration sent on flush."""

from __future__ import annotations

import io
import re
import sys

from scalebench.launch.progress import Reporter


def test_plain_progress_is_a_line_per_stage_and_per_tenth_of_the_run():
    log, terminal = io.StringIO(), io.StringIO()  # not a terminal: plain lines
    reporter = Reporter("2/3", 0, log, terminal)
    reporter.report({"stage": "operator norm"}, now=0.0)
    for done in range(101):
        reporter.report({"iteration": done, "max_iter": 100}, now=1.0 + done / 10)
    reporter.finish(succeeded=True)
    lines = log.getvalue().splitlines()
    assert terminal.getvalue() == log.getvalue()
    assert lines[0] == "[scalebench] experiment 2/3: set-up: operator norm"
    iterations = [int(re.search(r"iteration (\d+)/100", line)[1]) for line in lines[1:-1]]
    assert iterations == list(range(0, 101, 10))
    assert re.fullmatch(r"\[scalebench\] experiment 2/3: iteration 50/100, \S+ elapsed, "
                        r"ETA 5s", lines[6])
    assert lines[-1].startswith("[scalebench] experiment 2/3: done in ")


def test_an_iteration_report_left_out_by_the_spacing_is_sent_on_flush(monkeypatch, capsys):
    from scalebench.launch import progress

    monkeypatch.setenv(progress.ENABLE_VARIABLE, "1")
    monkeypatch.setattr(sys, "__stdout__", sys.stdout)
    reports = progress.IterationReports(4, interval_s=600.0)
    reports.iteration(0)
    reports.iteration(1)  # within interval_s of the first: held
    held = [progress.parse(line) for line in capsys.readouterr().out.splitlines()]
    reports.flush()
    flushed = [progress.parse(line) for line in capsys.readouterr().out.splitlines()]
    reports.flush()  # nothing held any more
    assert held == [{"iteration": 0, "max_iter": 4}]
    assert flushed == [{"iteration": 1, "max_iter": 4}]
    assert capsys.readouterr().out == ""
