"""The suite's grouping on two workers (tests/conftest.py): which tests share a worker, and
the order the image group runs in."""

from tests.conftest import IMAGE_GROUP, IMAGE_MODULES, run_order, worker_group


def test_image_modules_share_one_group_and_others_are_their_own():
    assert {worker_group(f"{module}::test_x") for module in IMAGE_MODULES} == {IMAGE_GROUP}
    assert worker_group("tests/test_plan.py::test_x[a::b]") == "tests/test_plan.py"


def test_the_podman_image_module_runs_before_the_sif_modules():
    collected = ["tests/test_plan.py::test_a", "tests/test_slurm_templates.py::test_b",
                 "tests/test_apptainer.py::test_c", "tests/test_containers.py::test_d",
                 "tests/test_config.py::test_e", "tests/test_apptainer.py::test_f"]
    assert sorted(collected, key=run_order) == [
        "tests/test_containers.py::test_d", "tests/test_apptainer.py::test_c",
        "tests/test_apptainer.py::test_f", "tests/test_slurm_templates.py::test_b",
        "tests/test_plan.py::test_a", "tests/test_config.py::test_e"]
