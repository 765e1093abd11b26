"""A run's process start-up (scalebench.rank.startup): the modules imported, their cyclic
garbage collected, the survivors frozen, the collector on again, even when an import fails."""

import subprocess
import sys

from tests.support.paths import REPO

# A module whose import leaves a reference cycle behind, watched through a weak reference,
# and notes whether the collector ran while it was imported.
CYCLIC_MODULE = """
import gc
import weakref

collector_on = gc.isenabled()

class Node:
    pass

node = Node()
node.itself = node
watch = weakref.ref(node)
del node
"""


def run_python(code: str, folder) -> list[str]:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, env={"PYTHONPATH": f"{REPO}:{folder}"}, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_imports_run_with_the_collector_paused_then_are_collected_once_and_frozen(tmp_path):
    """Paused during the imports, no automatic collection frees the cycle: only the one
    collection before the freeze does (a frozen cycle is never collected)."""
    (tmp_path / "cyclic_module.py").write_text(CYCLIC_MODULE)
    code = ("import gc, sys; from scalebench.rank.startup import import_and_freeze; "
            "import_and_freeze(['cyclic_module', 'json']); import cyclic_module; "
            "print(cyclic_module.collector_on, gc.isenabled(), gc.get_freeze_count() > 0, "
            "'json' in sys.modules, cyclic_module.watch() is None)")
    assert run_python(code, tmp_path) == ["False", "True", "True", "True", "True"]


def test_a_failing_import_leaves_the_collector_on_and_nothing_frozen(tmp_path):
    code = ("import gc; from scalebench.rank.startup import import_and_freeze\n"
            "try:\n    import_and_freeze(['json', 'no_such_module'])\n"
            "except ModuleNotFoundError as error:\n    print(error.name)\n"
            "print(gc.isenabled(), gc.get_freeze_count())")
    assert run_python(code, tmp_path) == ["no_such_module", "True", "0"]
