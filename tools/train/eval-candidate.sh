#!/usr/bin/env bash
# Scores a round-7 run as a candidate model, on the CPU:
#   bash tools/train/eval-candidate.sh RUN OUT
# RUN is a train_sections.py --work folder. Writes OUT-bf16 (the export) and OUT (its q8 copy, what
# the app would ship), makes the section songs of data/section-songs.json at each seed offset in
# OFFSETS (default "0 100 200") at STEPS flow steps (default 8) into OUT-songs-K, and scores them
# each and pooled. Then the description tests on OUT:
#   SONGLOOM_CANDIDATE_MODEL=OUT cargo test -p songloom-tests --test trained_model -- --nocapture --test-threads 1
# PYTHON (default python3) needs tools/train's packages; BIN (default target/release/songloom).
# AR_CFG sets the model's own AR guidance scale (songloom.json's ar_cfg_scale; the reference's 1.5
# where unset), which the app and the tests then sample with.
set -euo pipefail
RUN=${1:?usage: eval-candidate.sh RUN OUT}
OUT=${2:?usage: eval-candidate.sh RUN OUT}
PYTHON=${PYTHON:-python3}
BIN=${BIN:-target/release/songloom}
cd "$(dirname "$0")/../.."
for f in "$RUN/lm_tables.pt" "$RUN/lm_layers.pt" "$RUN/tokenizer.json" "$BIN"; do
    [ -e "$f" ] || { echo "eval-candidate.sh: $f is missing" >&2; exit 1; }
done
for f in "$OUT" "$OUT-bf16"; do
    [ ! -e "$f" ] || { echo "eval-candidate.sh: $f exists; remove it or name another OUT" >&2; exit 1; }
done
"$PYTHON" tools/train/export_captions.py --captions "$RUN" --out "$OUT-bf16" 2>&1 | grep -v Warn | tail -2
"$BIN" model quantize --weights 8bit "$OUT-bf16" --out "$OUT" 2>&1 | tail -1
if [ ! -f "$RUN/depth.pt" ]; then
    # The quantizer re-quantizes the depth decoder; the shipped one stays when the run did not train it.
    rm -rf "$OUT/rvq_depth_decoder"
    cp -r models/songloom-mini/rvq_depth_decoder "$OUT/"
fi
if [ -n "${AR_CFG:-}" ]; then
    chmod u+w "$OUT/songloom.json"
    "$PYTHON" - "$OUT/songloom.json" "$AR_CFG" <<'PY'
import json, sys
path, scale = sys.argv[1], float(sys.argv[2])
constants = json.load(open(path))
constants["ar_cfg_scale"] = scale
json.dump(constants, open(path, "w"), indent=2)
PY
fi
folders=()
for K in ${OFFSETS:-0 100 200}; do
    "$PYTHON" tools/train/section_check.py --songs "$OUT-songs-$K" --generate "$BIN" --model "$OUT" \
        --seed-offset "$K" --steps "${STEPS:-8}" 2>&1 | grep -v "Warn\|wavfile" | tail -3
    folders+=("$OUT-songs-$K")
done
echo "pooled:"
"$PYTHON" tools/train/section_check.py --songs "${folders[@]}" 2>&1 | grep -v "Warn\|wavfile" | tail -3
