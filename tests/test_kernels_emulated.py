"""kernels.cpp's AVX-512 code (16 lanes, masks, VNNI's vpdpbusd, the int16 path's 32-wide groups) run on a CPU
without AVX-512: the kernel tests again in a process whose kernels are built with every _mm512 intrinsic taken
from SIMDe's portable code (tests/avx512_on_avx2.h), so a machine with AVX2 only still holds the AVX-512 build to
the same tests as its own. The first run found two tests that held only with 8-lane sums (test_int8_integer's
fused layer against its 4-bit head, test_families_qwen_phi's int8 parity at 1.007e-5).

Needs the SIMDe headers (Debian/Ubuntu: libsimde-dev; .ci/run installs them where it can) and an AVX2 CPU."""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from inference import kernels

HERE = Path(__file__).resolve().parent
HEADER = HERE / "avx512_on_avx2.h"
SIMDE = [Path(p) / "simde" / "x86" / "avx512.h" for p in ("/usr/include", "/usr/local/include")]
EMULATED = f"-mavx2 -mfma -include {shlex.quote(str(HEADER))}"
# The kernel tests: products, attention, the fused step, the int8 paths, the 4-bit head, the tuner, and the
# fused layers of the families whose shapes are not multiples of 16 (Qwen3's head_dim 24, Phi-3's partial rotary).
SUITE = ["test_kernels.py", "test_int8_int16.py", "test_int8_integer.py", "test_int4_head.py",
         "test_kernel_shape.py", "test_families_qwen_phi.py", "test_families_gemma.py"]

pytestmark = [
    pytest.mark.skipif(not any(p.is_file() for p in SIMDE), reason="no SIMDe headers (apt install libsimde-dev)"),
    pytest.mark.skipif(torch.backends.cpu.get_cpu_capability() != "AVX2" or shutil.which("c++") is None,
                       reason="emulates AVX-512 on an AVX2 CPU with a C++ compiler"),
]


def test_the_avx512_build_passes_the_kernel_tests_on_this_cpu():
    env = {**os.environ, kernels.FLAGS_ENV: EMULATED}
    probe = subprocess.run([sys.executable, "-c", "from inference import kernels; ops = kernels.ops(); "
                            "print(ops is not None and ops.integer_code())"],
                           cwd=HERE.parent, env=env, capture_output=True, text=True, timeout=900)
    # built from the AVX-512 branches: the VNNI integer code is in (the AVX2 build reports "avx2")
    assert probe.stdout.strip().splitlines()[-1] == "vnni", probe.stderr[-2000:]
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "not slow", "-p", "no:cacheprovider",
                          *(str(HERE / name) for name in SUITE)],
                         cwd=HERE.parent, env=env, capture_output=True, text=True, timeout=1800)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " passed" in run.stdout.splitlines()[-1]
