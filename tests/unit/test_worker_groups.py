"""The suite's grouping on two workers and by folder (tests/conftest.py): which tests share a
worker, the order the image group runs in, and the marker each folder gives."""

from tests.conftest import (
    IMAGE_GROUP,
    IMAGE_MODULES,
    SHARED_GROUPS,
    folder_marker,
    run_order,
    worker_group,
)


def test_image_and_report_modules_share_their_groups_and_others_are_their_own():
    assert {worker_group(f"{module}::test_x") for module in IMAGE_MODULES} == {IMAGE_GROUP}
    assert worker_group("tests/integration/test_plan_command.py::test_x[a::b]") == \
        "tests/integration/test_plan_command.py"
    # a unit test is a group of its own, but where its module's fixtures are costly
    assert worker_group("tests/unit/test_plan.py::test_x[a::b]") == \
        "tests/unit/test_plan.py::test_x[a::b]"
    assert worker_group("tests/unit/test_config.py::test_x") == "tests/unit/test_config.py"
    assert {worker_group(f"{module}::test_x") for module in SHARED_GROUPS["report"]} == \
        {"report"}


def test_the_podman_image_module_runs_before_the_sif_modules():
    collected = ["tests/unit/test_plan.py::test_a",
                 "tests/system/test_slurm_templates.py::test_b",
                 "tests/system/test_apptainer.py::test_c",
                 "tests/system/test_containers.py::test_d",
                 "tests/unit/test_config.py::test_e", "tests/system/test_apptainer.py::test_f"]
    assert sorted(collected, key=run_order) == [
        "tests/system/test_containers.py::test_d", "tests/system/test_apptainer.py::test_c",
        "tests/system/test_apptainer.py::test_f", "tests/system/test_slurm_templates.py::test_b",
        "tests/unit/test_plan.py::test_a", "tests/unit/test_config.py::test_e"]


def test_each_folder_gives_its_marker():
    assert folder_marker("tests/unit/test_plan.py::test_a") == "unit"
    assert folder_marker("tests/integration/test_replay.py::test_b[x]") == "integration"
    assert folder_marker("tests/system/test_apptainer.py::test_c") == "system"
    assert folder_marker("tests/support/cli.py::x") is None
