"""The decode kernels' other build, tested on this CPU: the kernels (csrc/) have AVX-512 code (16 lanes, masks, VNNI's
vpdpbusd, the int16 path's 32-wide groups) and AVX2 code, and a machine builds only its own. Here the kernel tests
run again in a process whose kernels are built for the other one:
- on an AVX2 CPU, the AVX-512 build with every _mm512 intrinsic taken from SIMDe's portable code
  (tests/support/avx512_on_avx2.h; needs the SIMDe headers: Debian/Ubuntu libsimde-dev, which .ci/run installs where it can);
- on an AVX-512 CPU, the AVX2 build, which it runs natively.
The first run on AVX2 found two tests that held only with 8-lane sums (test_int8_integer's fused layer against its
4-bit head, test_families_qwen_phi's int8 parity at 1.007e-5)."""

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from inference import kernels

HERE = Path(__file__).resolve().parent
HEADER = HERE.parent / "support" / "avx512_on_avx2.h"
SIMDE = [Path(p) / "simde" / "x86" / "avx512.h" for p in ("/usr/include", "/usr/local/include")]
# this CPU's capability -> the other build's flags, and the integer path that build reports
OTHER = {"AVX2": (f"-mavx2 -mfma -include {shlex.quote(str(HEADER))}", "vnni"),
         "AVX512": ("-mavx2 -mfma", "avx2"), "AMX": ("-mavx2 -mfma", "avx2")}
CAPABILITY = torch.backends.cpu.get_cpu_capability()
# The kernel tests: products (of one row and of small M), attention, the fused step, a pass of 2-16 rows in one
# call, the int8 paths, the 4-bit head, the tuner, and the fused layers of the families whose shapes are not multiples of 16 (Qwen3's head_dim 24,
# Phi-3's partial rotary).
SUITE = ["kernels/test_kernels.py", "kernels/test_small_m.py", "kernels/test_decode_rows.py", "kernels/test_attend_paged.py",
         "kernels/test_int8_int16.py", "kernels/test_int8_integer.py", "kernels/test_int4_head.py",
         "kernels/test_kernel_shape.py", "inference/test_families_qwen_phi.py", "inference/test_families_gemma.py"]

pytestmark = [
    pytest.mark.kernels,
    pytest.mark.skipif(CAPABILITY == "AVX2" and not any(p.is_file() for p in SIMDE),
                       reason="no SIMDe headers to emulate AVX-512 with (apt install libsimde-dev)"),
]


def test_the_other_build_passes_the_kernel_tests_on_this_cpu():
    flags, integer_code = OTHER[CAPABILITY]
    env = {**os.environ, kernels.FLAGS_ENV: flags}
    probe = subprocess.run([sys.executable, "-c", "from inference import kernels; ops = kernels.ops(); "
                            "print(ops is not None and ops.integer_code())"],
                           cwd=HERE.parents[1], env=env, capture_output=True, text=True, timeout=900)
    # built from the other branches: the AVX-512 build has the VNNI integer code, the AVX2 build its own
    assert probe.stdout.strip().splitlines()[-1:] == [integer_code], probe.stderr[-2000:]
    assert integer_code != kernels.ops().integer_code()
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "not slow", "-p", "no:cacheprovider",
                          *(str(HERE.parent / name) for name in SUITE)],
                         cwd=HERE.parents[1], env=env, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout.splitlines()[-1]
