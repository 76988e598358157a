#!/usr/bin/env bash
# Issue 34 goal 5 on the lent GPU machine, in one call of about 4 minutes (it stops itself at 6):
#   here, once:  .venv/bin/python scripts/fetch_gpu_wheels.py   (fills the git-ignored .whl/)
#   device run:  command "bash benchmarks/gpu_check.sh", carry [".whl"], timeout_s 480
# It installs the carried wheels (what the machine lacks: pydantic, rapidfuzz, bert-score, the
# openai SDK...) into /tmp/site, then runs benchmarks/gpu_check.py: BERTScore against
# bert-score on the GPU, then benchmarks/judge.py on the machine's cores. Output goes to $OUT
# (gpu_check.json, gpu_check.log). Extra arguments go to gpu_check.py (e.g. --device cpu --smoke).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# Only where something is missing: a venv that has it all (the tests here) installs nothing.
if ! "$PY" -c "import bert_score, openai, pydantic, rapidfuzz" 2>/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
OUT=${OUT:-gpu_check_out}
mkdir -p "$OUT"
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv \
        | tee -a "$OUT/gpu_check.log" || true
fi
exec timeout 360 "$PY" benchmarks/gpu_check.py --out "$OUT" "$@"
