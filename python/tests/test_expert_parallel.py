"""examples/expert_parallel.py with 2 and 4 gloo processes agrees with a single process running all experts."""
import os
import re
import subprocess
import sys

import pytest

from conftest import needs_torch

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "expert_parallel.py")


@needs_torch
@pytest.mark.parametrize("world", [2, 4])
def test_expert_parallel_gloo(world):
    proc = subprocess.run([sys.executable, EXAMPLE, "--world-size", str(world)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    m = re.search(r"max relative difference (\S+), (\d+)/(\d+) outputs bit-identical", proc.stdout)
    assert m, proc.stdout
    print(proc.stdout)
    assert float(m.group(1)) <= 1e-2 and int(m.group(3)) == world * 8 * 256
