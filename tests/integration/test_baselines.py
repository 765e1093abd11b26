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


def test_a_baseline_listed_beside_other_datasets_runs_on_those_it_applies_to(tmp_path,
                                                                             write_config):
    """fbp and cgls beside a CT and a super-resolution dataset, as in the methods example:
    fbp's rows are the CT's alone, cgls's both datasets', and the methods view names fbp."""
    from scalebench.results.report.methods import method_names

    benchmark = copy_benchmark(tmp_path)
    config = write_config({
        "objective": ["imaging_inverse_problem"],
        "dataset": [{"tomography_2d": {"image_size": 32, "num_angles": 20,
                                       "projector": "torch"}},
                    {"multiframe_superres": {"image_size": 32}}],
        "solver": [{"fbp": {"device": "cpu"}}, {"cgls": {"max_iter": 2, "device": "cpu"}}],
        "max-runs": 100, "timeout": 300})
    done = run_cli("run", config, "--benchmark", benchmark, "--output", "mixed", "--no-html")
    assert done.returncode == 0, done.stderr[-3000:]
    rows = load_results([benchmark / "outputs" / "mixed.parquet"]).rows
    datasets = rows["dataset_name"].astype(str).str.split("[").str[0]
    solvers = rows["solver_name"].astype(str).str.split("[").str[0]
    pairs = set(zip(datasets, solvers, strict=True))
    assert pairs == {("tomography_2d", "fbp"), ("tomography_2d", "cgls"),
                     ("multiframe_superres", "cgls")}
    assert "fbp filter=ram-lak" in set(method_names(rows))  # a method per filter
