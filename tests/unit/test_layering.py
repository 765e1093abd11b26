"""The package's layering, read from the source: no import cycle, each package imports only
those below it, the rules the design rests on (the launcher holds no stack, provenance
depends on nothing of scalebench, results never reach back into the launcher), and a long
module says that it holds one job."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

# Lowest first: a package may import its own modules and those of lower layers only (imports
# at module level; imports inside functions load on use and are checked by the rules below).
LAYERS = (
    ("scalebench", "scalebench.errors", "scalebench.repository", "scalebench.statistics",
     "scalebench.durations", "provenance"),
    ("scalebench.param_spec",),
    ("scalebench.launch", "scalebench.data"),
    ("scalebench.rank",),
    ("scalebench.physics", "scalebench.denoisers"),
    ("scalebench.problems",),
    ("scalebench.loops",),
    ("scalebench.benchmarks",),
    ("scalebench.experiment", "scalebench.results"),
    ("scalebench.planning", "scalebench.tuning"),
    ("scalebench.benchopt_glue",),
    ("scalebench.cli", "scalebench.cli_arguments", "scalebench.__main__"),
)
LAYER = {package: level for level, packages in enumerate(LAYERS) for package in packages}
# What the launcher may import at module level besides the standard library.
LAUNCHER_ALLOWED = ("scalebench.launch", "scalebench.errors", "scalebench.repository",
                    "scalebench.statistics", "scalebench.durations", "provenance")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for base in ("scalebench", "provenance")
           for path in sorted((REPO / base).rglob("*.py"))}


def imported(path: Path, module_level: bool, type_only: bool = False) -> set[str]:
    """Absolute names ``path`` imports (``from a import b`` gives ``a`` and ``a.b``), at
    module level only or anywhere, inside functions and classes too; ``type_only``: the
    ``TYPE_CHECKING`` blocks too (they never run, but a design that needs them depends on
    what they name)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()

    def note(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)

    def walk(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) \
                    and not type_only:
                continue
            note(node)
            if module_level and isinstance(
                    node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            for field in ("body", "orelse", "handlers", "finalbody", "cases"):
                inner = getattr(node, field, None)
                if isinstance(inner, list):
                    walk([item for item in inner if isinstance(item, ast.stmt)]
                         + [stmt for item in inner if not isinstance(item, ast.stmt)
                            for stmt in getattr(item, "body", [])])

    walk(tree.body)
    return found


def package(module: str) -> str:
    """The layer unit of a module: its subpackage of scalebench (or a root module), or
    provenance."""
    parts = module.split(".")
    if parts[0] == "provenance":
        return "provenance"
    return ".".join(parts[:2])


def internal_imports(module: str, module_level: bool = True,
                     type_only: bool = False) -> set[str]:
    return {name for name in imported(MODULES[module], module_level, type_only)
            if name in MODULES}


def test_every_package_is_in_a_layer():
    assert {package(module) for module in MODULES} == set(LAYER)


def import_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` (each module to those it imports) as the modules along it, the
    first repeated at the end; None when there is none."""
    done: set[str] = set()

    def cycle_from(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return path[path.index(module):] + [module]
        if module in done:
            return None
        for other in sorted(graph.get(module, ())):
            found = cycle_from(other, [*path, module])
            if found:
                return found
        done.add(module)
        return None

    for module in sorted(graph):
        found = cycle_from(module, [])
        if found:
            return found
    return None


def test_no_module_imports_one_that_imports_it_back():
    """Imports inside functions and type-only imports count: a lazy import hides a cycle from
    the interpreter, not from the design."""
    graph = {module: internal_imports(module, module_level=False, type_only=True) - {module}
             for module in MODULES}
    cycle = import_cycle(graph)
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


# Modules run as processes of their own to reach the whole stack (the launcher's children):
# entry points like the CLI, whatever package holds them.
ENTRY_MODULES = ("scalebench.launch.children",)


def layer(module: str) -> int:
    return len(LAYERS) - 1 if module in ENTRY_MODULES else LAYER[package(module)]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_only_its_layer_and_those_below(module):
    """Anywhere in the module: at module level, inside functions and type-only."""
    level = layer(module)
    above = sorted(name for name in internal_imports(module, module_level=False,
                                                     type_only=True)
                   if layer(name) > level)
    assert above == [], f"{module} (layer {level}) imports {above} from above it"


def test_the_layer_rule_reads_imports_inside_functions_and_type_only_ones(tmp_path):
    """A lazy import and a TYPE_CHECKING import from above are both found."""
    lower = tmp_path / "memory.py"
    lower.write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
                     "    from scalebench.planning.plan import Job\n\n\n"
                     "def f():\n    from scalebench.cli import main\n")
    assert imported(lower, module_level=True) == {"typing", "typing.TYPE_CHECKING"}
    assert {"scalebench.planning.plan", "scalebench.cli"} <= \
        imported(lower, module_level=False, type_only=True)


def beyond_the_launcher_allowance(names: set[str]) -> list[str]:
    """The imports among ``names`` that are neither the standard library nor LAUNCHER_ALLOWED."""
    return sorted(name for name in names if name.split(".")[0] not in sys.stdlib_module_names
                  and not name.startswith(LAUNCHER_ALLOWED))


def test_the_launcher_imports_the_standard_library_and_light_modules_only():
    for module in (m for m in MODULES if m.startswith("scalebench.launch")):
        outside = beyond_the_launcher_allowance(imported(MODULES[module], module_level=True))
        assert outside == [], f"{module} imports {outside} at module level"


def test_provenance_imports_nothing_of_scalebench():
    for module in (m for m in MODULES if m.startswith("provenance")):
        reached = sorted(name for name in imported(MODULES[module], module_level=False)
                         if name.startswith("scalebench"))
        assert reached == [], f"{module} imports {reached}"


def test_results_never_import_the_launcher():
    for module in (m for m in MODULES if m.startswith("scalebench.results")):
        reached = sorted(name for name in imported(MODULES[module], module_level=False)
                         if name.startswith("scalebench.launch"))
        assert reached == [], f"{module} imports {reached}"


def test_the_rules_find_what_they_forbid(tmp_path):
    """The checks read real imports: a module-level torch import in the launcher, or a lazy
    launcher import in results, is found."""
    launcher = tmp_path / "runner.py"
    launcher.write_text("import json\nimport torch\n\n\ndef f():\n    import numpy\n")
    assert imported(launcher, module_level=True) == {"json", "torch"}
    results = tmp_path / "replay.py"
    results.write_text("def f():\n    from scalebench.launch.runner import run\n")
    assert "scalebench.launch.runner" in imported(results, module_level=False)
    assert imported(results, module_level=True) == set()
    assert beyond_the_launcher_allowance(imported(launcher, module_level=True)) == ["torch"]


def test_the_cycle_check_finds_a_cycle_through_a_function_level_import(tmp_path):
    """Two modules that import each other, one of them inside a function, form a cycle; the
    same two without the lazy import do not."""
    expand = tmp_path / "expand.py"
    expand.write_text("from pkg.plan import Job\n\n\ndef f():\n    from pkg.expand import g\n")
    plan = tmp_path / "plan.py"
    plan.write_text("import json\n\n\ndef g():\n    from pkg.expand import expand\n")
    graph = {"pkg.expand": imported(expand, module_level=False) & {"pkg.plan"},
             "pkg.plan": imported(plan, module_level=False) & {"pkg.expand"}}
    assert import_cycle(graph) == ["pkg.expand", "pkg.plan", "pkg.expand"]
    graph["pkg.plan"] = imported(plan, module_level=True) & {"pkg.expand"}
    assert import_cycle(graph) is None


# A module longer than this holds one job and says which in its docstring's first sentence
# ("One job: ..."); a longer one doing two is split by job.
LONG_MODULE_LINES = 350


def one_job_or_short(path: Path) -> bool:
    """Whether ``path`` is at most LONG_MODULE_LINES long or its docstring opens "One job:"."""
    text = path.read_text()
    docstring = ast.get_docstring(ast.parse(text)) or ""
    return len(text.splitlines()) <= LONG_MODULE_LINES or docstring.startswith("One job:")


def test_a_long_module_says_its_one_job():
    long = [module for module, path in MODULES.items() if not one_job_or_short(path)]
    assert long == [], f"{long} exceed {LONG_MODULE_LINES} lines without a 'One job:' docstring"


def test_the_length_rule_reads_lines_and_the_docstring(tmp_path):
    long = tmp_path / "long.py"
    long.write_text('"""Two jobs."""\n' + "x = 1\n" * LONG_MODULE_LINES)
    assert not one_job_or_short(long)
    long.write_text('"""One job: a table."""\n' + "x = 1\n" * LONG_MODULE_LINES)
    assert one_job_or_short(long)
    long.write_text('"""Two jobs."""\n' + "x = 1\n" * (LONG_MODULE_LINES - 1))
    assert one_job_or_short(long)
