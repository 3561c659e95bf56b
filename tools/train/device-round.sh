#!/usr/bin/env bash
# One training round on the GPU machine (the `device` tool's `run`, with carry [".whl", "tools/train/runs"]):
#   ROUND=1  the autoencoder and the AR half at once (they are independent; both fit one H200)
#   ROUND=2  the autoencoder again, from round 1's weights (carried in tools/train/runs/)
#   ROUND=3  the condition encoder and the DiT on the latents of round 2's encoder, and beside them
#            round 2's decoder trained further with that encoder frozen
#   ROUND=4  (v2) the AR half again from round 1's (runs/semantic), half its songs retimed to other tempos
#   ROUND=5  (v2) the condition encoder and the DiT on round 4's AR half (carry runs/ae and runs/semantic)
#   ROUND=6  (v3) the language model reads free-form descriptions, taught by the shipped v2 AR half
#            (train_captions.py; carry only .whl)
#   ROUND=7  (v4) the language model follows the lyrics' section tags, taught by the shipped v3 AR half
#            (train_sections.py; carry .whl, and tools/train/runs for an --init in ARGS or ARGS_BESIDE)
# MINUTES is each stage's budget. Logs and weights land under $OUT/<stage>/ (ROUND=7: packed, see there).
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
    tail -n 3 "$OUT/ae.out" "$OUT/semantic.out"
    exit $status
    ;;
2)
    python3 train_autoencoder.py --work "$OUT/ae" --state /tmp/state/ae --init runs/ae/weights.pt --compile \
        --minutes "$MINUTES" 2>&1 | grep -v Warning | tee "$OUT/ae.out"
    ;;
3)
    python3 train_autoencoder.py --work "$OUT/decoder" --state /tmp/state/decoder --init runs/ae/weights.pt \
        --freeze-encoder --compile --minutes "$MINUTES" > "$OUT/decoder.out" 2>&1 &
    decoder=$!
    status=0
    python3 train_acoustic.py --work "$OUT/acoustic" --state /tmp/state/acoustic --autoencoder runs/ae \
        --semantic runs/semantic --minutes "$MINUTES" > "$OUT/acoustic.out" 2>&1 || status=$?
    wait $decoder || status=$?
    tail -n 3 "$OUT/decoder.out" "$OUT/acoustic.out"
    exit $status
    ;;
4)
    python3 train_semantic.py --work "$OUT/semantic" --state /tmp/state/semantic --init runs/semantic/weights.pt \
        --minutes "$MINUTES" 2>&1 | grep -v Warning | tee "$OUT/semantic.out"
    ;;
5)
    python3 train_acoustic.py --work "$OUT/acoustic" --state /tmp/state/acoustic --autoencoder runs/ae \
        --semantic runs/semantic --minutes "$MINUTES" 2>&1 | grep -v Warning | tee "$OUT/acoustic.out"
    ;;
6)
    python3 train_captions.py --work "$OUT/captions" --minutes "$MINUTES" ${ARGS:-} 2>&1 | grep -v Warning | tee "$OUT/captions.out"
    ;;
7)
    # ARGS_BESIDE trains a second student beside the first, into $OUT/sections-beside: the model is
    # small enough that two on one GPU make 1.2x the steps of one (5.2 steps/s each on an H100).
    if [ -n "${ARGS_BESIDE:-}" ]; then
        python3 train_sections.py --work "$OUT/sections-beside" --minutes "$MINUTES" $ARGS_BESIDE \
            > "$OUT/sections-beside.out" 2>&1 &
        beside=$!
    fi
    status=0
    python3 train_sections.py --work "$OUT/sections" --minutes "$MINUTES" ${ARGS:-} 2>&1 | grep -v Warning | tee "$OUT/sections.out" || status=$?
    if [ -n "${beside:-}" ]; then wait "$beside" || status=$?; fi
    # A call brings back 8 files of 16 MiB at most: each student as its tables and a tar of the rest
    # (unpack: tar xf S-weights.tar -C RUN && cp S-tables.pt RUN/lm_tables.pt).
    for stage in sections sections-beside; do
        [ -f "$OUT/$stage/lm_tables.pt" ] || continue
        mv "$OUT/$stage/lm_tables.pt" "$OUT/$stage-tables.pt"
        tar cf "$OUT/$stage-weights.tar" -C "$OUT/$stage" . && rm -r "${OUT:?}/$stage"
    done
    exit $status
    ;;
esac
