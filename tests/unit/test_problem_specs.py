"""Contract tests over every registered problem (the problems of every repository benchmark):
its spec carries what the report and the operator tests read of it, so that adding a problem
is its module, its registry line and its dataset file. A problem without a work parameter or
an adjointness case, or with one that names no parameter of its own, fails here."""

import pytest

from scalebench.benchmarks import BENCHMARKS, registered_problems, registered_solvers
from scalebench.param_spec import validate_parameters
from scalebench.rank.names import QUALITY_METRICS, metric_column
from scalebench.results.report.data import headline_metric
from scalebench.results.report.scaling import WORK_PARAMETERS

PROBLEMS = registered_problems()


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_work_parameters_are_parameters_of_the_problem(name):
    spec = PROBLEMS[name]
    assert spec.work_parameters, f"{name}: no work parameter (ProblemSpec.work_parameters)"
    for parameter, power in spec.work_parameters.items():
        assert parameter in spec.params, f"{name}: work parameter '{parameter}' is not one " \
                                         f"of its parameters ({', '.join(spec.params)})"
        assert spec.params[parameter].kind is int and power in (1, 2, 3)


def test_a_work_parameter_grows_work_alike_in_every_problem_and_solver():
    """The report's weak scaling reads one power per parameter column."""
    for kind, specs in (("dataset", PROBLEMS), ("solver", registered_solvers())):
        powers: dict[str, set[int]] = {}
        for spec in specs.values():
            for parameter, power in spec.work_parameters.items():
                powers.setdefault(parameter, set()).add(power)
                assert parameter in spec.params
        assert {p: len(found) for p, found in powers.items()} == dict.fromkeys(powers, 1)
        assert {f"p_{kind}_{p}": found.pop() for p, found in powers.items()}.items() \
            <= WORK_PARAMETERS.items()


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_the_headline_metric_is_a_quality_column_the_report_reads(name):
    column, label = PROBLEMS[name].headline
    assert column in {metric_column(metric) for metric in QUALITY_METRICS} and label
    assert headline_metric(f"{name}[image_size=32]") == (column, label)


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_every_problem_has_valid_adjointness_cases(name):
    spec = PROBLEMS[name]
    assert spec.adjoint_cases, f"{name}: no adjointness case (ProblemSpec.adjoint_cases)"
    for case in spec.adjoint_cases:
        validate_parameters(f"dataset '{name}'", case.params, spec.params)


def test_each_benchmark_names_each_problem_by_its_spec_name():
    for benchmark in BENCHMARKS.values():
        assert all(spec.name == name for name, spec in benchmark.problems.items())
        assert all(spec.name == name for name, spec in benchmark.solvers.items())


def test_a_dataset_of_a_folder_s_own_file_gets_the_default_headline():
    assert headline_metric("my_own_dataset[size=3]") == ("objective_psnr_db", "PSNR")
