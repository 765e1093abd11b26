"""Each runtime's behaviour lives in its class (scalebench.launch.runtimes), as ReFrame's
container platforms: nothing else in the repository asks which runtime it holds."""

from __future__ import annotations

import ast

import pytest

from scalebench.errors import ScalebenchError
from scalebench.launch.images import NamedImage
from scalebench.launch.runtimes import RUNTIMES, Apptainer, ContainerRuntime, Docker, Host, Podman
from tests.support.paths import REPO

RUNTIME_CLASSES = {kind.__name__ for kind in (*RUNTIMES.values(), ContainerRuntime)}


def runtime_type_tests(source: str) -> list[str]:
    """The ``isinstance(x, <runtime class>)`` and ``type(x) is/== <runtime class>`` of
    ``source``, as written."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id == "isinstance" and len(node.args) == 2:
            names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
            if names & RUNTIME_CLASSES:
                found.append(ast.unparse(node))
        elif isinstance(node, ast.Compare) and isinstance(node.left, ast.Call) \
                and isinstance(node.left.func, ast.Name) and node.left.func.id == "type":
            names = {n.id for c in node.comparators for n in ast.walk(c)
                     if isinstance(n, ast.Name)}
            if names & RUNTIME_CLASSES:
                found.append(ast.unparse(node))
    return found


def test_no_code_branches_on_the_runtime_type():
    sources = [path for base in ("scalebench", "containers", "tools", "provenance")
               for path in sorted((REPO / base).rglob("*.py"))]
    branching = {str(path.relative_to(REPO)): tests for path in sources
                 if (tests := runtime_type_tests(path.read_text()))}
    assert branching == {}


def test_the_branch_check_finds_type_tests_on_runtimes():
    source = ("if isinstance(runtime, (Host, Apptainer)):\n    pass\n"
              "if type(runtime) is Podman:\n    pass\n"
              "if isinstance(value, str):\n    pass\n")
    assert runtime_type_tests(source) == ["isinstance(runtime, (Host, Apptainer))",
                                          "type(runtime) is Podman"]


def test_each_runtime_says_what_image_it_starts():
    assert Host().image_reference(NamedImage("ignored.sif")) is None
    assert Apptainer().image_reference(NamedImage("a.sif")) == "a.sif"
    with pytest.raises(ScalebenchError, match=r"^SB_IMAGE must name the SIF file "
                                              r"\(SB_RUNTIME=apptainer\)$"):
        Apptainer().image_reference(NamedImage(""))
    with pytest.raises(ScalebenchError, match=r"^SB_IMAGE must name the image "
                                              r"\(SB_RUNTIME=podman\)$"):
        Podman().image_reference(NamedImage(""))


def test_only_podman_builds_with_a_fixed_timestamp():
    assert Docker().build_options("1700000000") == []
    assert Podman().build_options("1700000000") == ["--timestamp", "1700000000"]


def test_labels_handed_in_that_are_not_json_are_refused():
    with pytest.raises(ScalebenchError, match="^SB_IMAGE_LABELS_JSON is not JSON: "):
        Docker().handed_identity("sb:1", NamedImage("sb:1", "sha256:" + "0" * 64, "{"))


def test_the_interpreter_is_the_hosts_venv_or_the_images_python():
    assert Host().interpreter("/repo") == "/repo/.venv/bin/python"
    assert {kind().interpreter("/repo") for kind in (Apptainer, Docker, Podman)} == {"python"}
