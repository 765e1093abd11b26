"""Importing provenance and collecting a record never imports torch, in a fresh interpreter."""




import subprocess
import sys

from tests.support.paths import REPO


def test_importing_and_collecting_never_imports_torch():
    code = ("import sys, provenance; r = provenance.collect(); "
            "assert 'torch' not in sys.modules, 'torch imported'; print(r['complete'])")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=REPO, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"
