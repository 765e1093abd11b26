"""No module's globals are assigned from outside it, read from the source.

A module that sets another's global (``operator_norm.PROBE_APPLICATIONS = 3``), a class
attribute of a class it imported (``StepProfiler.reset_peaks = False``), an item of another
module's dict (``DENOISERS[name] = spec``) or does either through ``setattr`` changes the
process for everything that runs after it, with nothing to put it back: what a process is
told to do differently is a ``scalebench.rank.settings.ProcessSettings`` installed for a
block, and a registry or cache is changed through its own module's functions. The only
exceptions are the switches other libraries document as set by assignment (``DOCUMENTED``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support.paths import REPO

FOLDERS = ("scalebench", "provenance", "tools", "benchmark_inference", "benchmark_training",
           "containers")
# Switches of the standard library and torch whose documented interface is an assignment.
DOCUMENTED = frozenset({
    "os.environ", "sys.path", "sys.excepthook",
    # what a forked process sets to become the command it runs (the preloaded server)
    "sys.argv", "sys.stdout", "sys.stderr",
    "torch.backends.cudnn.deterministic", "torch.backends.cudnn.benchmark",
    "torch.backends.cuda.matmul.allow_tf32", "torch.backends.cudnn.allow_tf32",
})
MUTATING_METHODS = frozenset({"append", "add", "update", "setdefault", "extend", "insert",
                              "remove", "discard", "pop", "popitem", "clear"})


def imported_names(tree: ast.AST) -> tuple[set[str], set[str]]:
    """The names the module's imports bind, anywhere in it: (every one, those ``from ...
    import`` binds, which may be another module's object rather than a module)."""
    every, objects = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            every.update(alias.asname or alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names = {alias.asname or alias.name for alias in node.names}
            every.update(names)
            objects.update(names)
    return every, objects


def root(node: ast.expr) -> str | None:
    """The name an attribute or item chain starts from (``a`` of ``a.b[c].d``)."""
    while isinstance(node, ast.Attribute | ast.Subscript):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def assigned(node: ast.AST) -> list[ast.expr]:
    """The targets ``node`` assigns or deletes, tuples unpacked."""
    if isinstance(node, ast.Assign | ast.Delete):
        targets = node.targets
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        targets = [node.target]
    else:
        return []
    return [part for target in targets
            for part in (target.elts if isinstance(target, ast.Tuple | ast.List) else [target])]


def outside_assignments(source: str) -> list[str]:
    """Each assignment in ``source`` to what an import brought in, ``line: text`` in the
    order of the lines."""
    tree = ast.parse(source)
    every, objects = imported_names(tree)
    found = []

    def note(node: ast.AST, target: ast.expr) -> None:
        what = ast.unparse(target.value if isinstance(target, ast.Subscript) else target)
        if what not in DOCUMENTED:
            found.append((node.lineno, ast.unparse(node).splitlines()[0]))

    for node in ast.walk(tree):
        for target in assigned(node):
            if isinstance(target, ast.Attribute | ast.Subscript) and root(target) in every:
                note(node, target)
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        if isinstance(function, ast.Name) and function.id in ("setattr", "delattr") \
                and node.args and root(node.args[0]) in every:
            note(node, node.args[0])
        elif isinstance(function, ast.Attribute) and function.attr in MUTATING_METHODS \
                and isinstance(function.value, ast.Name) and function.value.id in objects:
            note(node, function.value)
    return [f"{line}: {text}" for line, text in sorted(found)]


FILES = sorted(path for folder in FOLDERS for path in (REPO / folder).rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=lambda path: str(path.relative_to(REPO)))
def test_no_module_assigns_what_it_imported(path: Path):
    found = outside_assignments(path.read_text())
    assert found == [], f"{path.relative_to(REPO)} assigns another module's state: {found}"


def test_the_detector_finds_each_kind_of_outside_assignment():
    """Another module's global, an imported class's attribute, another module's dict item,
    through setattr or a mutating method: each is found; the module's own globals, local
    objects and documented switches are not."""
    source = '''
import os
import sys
from scalebench.rank import operator_norm
from scalebench.rank.profiling import StepProfiler
from scalebench.denoisers.catalog import DENOISERS

LIMIT = 3
_seen = {}


def f(spec):
    from scalebench.physics import parallel_beam

    global LIMIT
    LIMIT = 4
    _seen["a"] = 1
    local = object()
    local.value = 1
    os.environ["X"] = "1"
    sys.excepthook = print
    operator_norm.PROBE_APPLICATIONS = 3
    StepProfiler.reset_peaks, other = False, 1
    parallel_beam.CHUNK_ELEMENTS += 1
    DENOISERS[spec.name] = spec
    setattr(operator_norm, "TOLERANCE", 1.0)
    DENOISERS.update(tv=spec)
    del operator_norm.METHOD
'''
    found = [line.split(": ", 1)[1] for line in outside_assignments(source)]
    assert found == [
        "operator_norm.PROBE_APPLICATIONS = 3",
        "StepProfiler.reset_peaks, other = (False, 1)",
        "parallel_beam.CHUNK_ELEMENTS += 1",
        "DENOISERS[spec.name] = spec",
        "setattr(operator_norm, 'TOLERANCE', 1.0)",
        "DENOISERS.update(tv=spec)",
        "del operator_norm.METHOD",
    ]


def test_every_documented_switch_is_still_set_somewhere():
    """An exception nothing uses any more is taken off the list."""
    text = "\n".join(path.read_text() for path in FILES)
    assert [switch for switch in sorted(DOCUMENTED) if switch not in text] == []


def test_installed_settings_end_with_their_block_even_when_it_fails():
    """Nested blocks see their own settings; each end, by error too, brings the previous
    ones back, down to a run's defaults."""
    from scalebench.rank.settings import ProcessSettings, installed, process_settings

    probe = ProcessSettings(step_peak_resets=False, norm_applications=10)
    cut = ProcessSettings(step_peak_resets=False, norm_applications=3, tv_iterations=3)
    with installed(probe):
        with pytest.raises(RuntimeError), installed(cut):
            assert process_settings() == cut
            raise RuntimeError("the probe's run failed")
        assert process_settings() == probe
    assert process_settings() == ProcessSettings()
