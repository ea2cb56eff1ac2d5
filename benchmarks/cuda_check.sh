#!/bin/bash
# The GPU check, in one call of a machine with an NVIDIA GPU (device time is scarce: one prepared run).
#   bash benchmarks/cuda_check.sh TOKENIZER_FOLDER [WHEELS_FOLDER]
# 1. the CUDA tests (tests marked `cuda`), 2. bench_cuda.py (TokenStep vs transformers on the GPU),
# 3. the quick suite (not slow, not cuda) on a machine where "auto" means CUDA. Logs and JSON go to $OUT.
# The JSON, when RESULTS.md cites it, is kept as benchmarks/results/cuda/<machine>_<date>.json.
# First run, 2026-12-04 on an H200: about 200 s of device time for 1 and 2, and 3 reached ~half the suite
# in 185 s; give the call 480 s or set SUITE_TIMEOUT lower. Since issue 43 bench_cuda also times transformers with a
# static cache compiled by torch.compile (a compile per shape and dtype): BENCH_TIMEOUT is 300 s, SHAPES=default
# DTYPES=bfloat16 halve it when time is short.
# The machine's python3 brings torch, transformers, pytest, hypothesis, xdist; gguf and platformdirs
# come as wheels when missing there. No Qt there: the GUI tests fail to collect and are not counted.
set -u
OUT=${OUT:-/tmp/cuda_check}
mkdir -p "$OUT"
TOKENIZER=${1:?a folder holding tokenizer.json}
WHEELS=${2:-}
export PYTHONUNBUFFERED=1 TOKENSTEP_CONFIG_DIR=$(mktemp -d) XDG_CACHE_HOME=$(mktemp -d)
if [ -n "$WHEELS" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        "$WHEELS"/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=.:${PYTHONPATH:-}
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
  python3 -c "import sys, torch, transformers; print(sys.version.split()[0], torch.__version__, \
transformers.__version__, torch.cuda.get_device_name())"
  nproc; } 2>&1 | tee "$OUT/machine.txt"

echo "== CUDA tests"
timeout 150 python3 -m pytest -q -p no:cacheprovider -m cuda -rs tests/inference/test_cuda.py \
    tests/inference/test_families_qwen_phi.py 2>&1 | tee "$OUT/cuda_tests.log" | tail -40

echo "== bench_cuda"
timeout "${BENCH_TIMEOUT:-300}" python3 benchmarks/bench_cuda.py --tokenizer "$TOKENIZER" \
    --shapes "${SHAPES:-default,llama-1b}" --dtypes "${DTYPES:-bfloat16,float32}" \
    --json "$OUT/bench_cuda.json" 2>&1 | grep -v "it/s\]" | tee "$OUT/bench_cuda.log" | tail -30

echo "== quick suite with CUDA present (names of failures as they happen; it may not finish in time)"
timeout "${SUITE_TIMEOUT:-180}" python3 -m pytest -v -p no:cacheprovider -p no:benchmark \
    -m "not slow and not cuda" -n "${WORKERS:-16}" --continue-on-collection-errors tests 2>&1 \
    | grep -E "FAILED|ERROR|passed|failed" > "$OUT/suite.txt"
grep -oE "(FAILED|ERROR) tests/[^ ]+::[^ ]+" "$OUT/suite.txt" | sort -u | tee "$OUT/suite_failures.txt"
echo "$(grep -c PASSED "$OUT/suite.txt") passed before the limit"
