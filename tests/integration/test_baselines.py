"""The baselines under `scalebench run`: a radio run's closing line and its report's quality
table say whether the run beat a blank sky."""

from scalebench.results.report.data import beats_blank_sky, load_results
from scalebench.results.report.views import quality
from tests.support.cli import copy_benchmark, run_cli

RADIO = {"radio_interferometry": {"image_size": 32, "num_times": 4, "num_channels": 1}}


def test_a_radio_run_says_whether_it_beats_a_blank_sky(tmp_path, write_config):
    benchmark = copy_benchmark(tmp_path)
    config = write_config({
        "objective": ["imaging_inverse_problem"], "dataset": [RADIO],
        "solver": [{"clean": {"max_iter": 2, "components_per_iter": 20, "device": "cpu"}},
                   {"cgls": {"max_iter": 3, "device": "cpu"}}],
        "max-runs": 100, "timeout": 300})
    done = run_cli("run", config, "--benchmark", benchmark, "--output", "radio", "--no-html")
    assert done.returncode == 0, done.stderr[-3000:]
    results = load_results([benchmark / "outputs" / "radio.parquet"])
    verdicts = beats_blank_sky(results.rows)
    assert len(verdicts) == 2
    # the verdict is the sign of each run's last SNR, as the file records it
    last = results.rows.sort_values("stop_val").groupby("run").last()["objective_snr_db"]
    assert verdicts.to_dict() == (last > 0).to_dict()
    closing = done.stdout.strip().splitlines()[-1]
    assert closing.startswith(f"radio interferometry: {int(verdicts.sum())} of 2 run(s) beat "
                              f"a blank sky (final SNR > 0 dB)")
    table = quality(results).summary
    column = table.header.index("beats a blank sky (final SNR > 0 dB)")
    assert sorted(row[column] for row in table.rows) == sorted(
        "yes" if v else "no" for v in verdicts)
