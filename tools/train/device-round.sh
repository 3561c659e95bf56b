#!/usr/bin/env bash
# One training round on the GPU machine (the `device` tool's `run`, with carry [".whl", "tools/train/runs"]):
#   ROUND=1  the autoencoder and the AR half at once (they are independent; both fit one H200)
#   ROUND=2  the condition encoder and the DiT, from round 1's weights (carried in tools/train/runs/)
# MINUTES is each stage's budget. Logs and weights land under $OUT/<stage>/.
set -euo pipefail
cd "$(dirname "$0")"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site ../../.whl/*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
MINUTES=${MINUTES:-7}
nvidia-smi --query-gpu=name,memory.used --format=csv,noheader
case "${ROUND:?}" in
1)
    python3 train_autoencoder.py --work "$OUT/ae" --state /tmp/state/ae --minutes "$MINUTES" > "$OUT/ae.out" 2>&1 &
    ae=$!
    python3 train_semantic.py --work "$OUT/semantic" --state /tmp/state/semantic --minutes "$MINUTES" > "$OUT/semantic.out" 2>&1 &
    semantic=$!
    status=0
    wait $ae || status=$?
    wait $semantic || status=$?
    tail -3 "$OUT/ae.out" "$OUT/semantic.out"
    exit $status
    ;;
2)
    python3 train_acoustic.py --work "$OUT/acoustic" --state /tmp/state/acoustic --autoencoder runs/ae \
        --semantic runs/semantic --minutes "$MINUTES" 2>&1 | tee "$OUT/acoustic.out" | grep -v Warning
    ;;
esac
