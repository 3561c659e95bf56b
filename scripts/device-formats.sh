#!/bin/bash
# Runs on the GPU machine over what scripts/device-pack.sh packed into .device/: the CUDA tests
# that load checkpoints (parity, parity_quantized, pipeline, memory), then `songloom stage lm` and
# `stage depth` of the tiny checkpoint under each weight format (bf16, --weights 8bit, a q8 and a q4
# copy) on the CPU and through CUDA, each output held against the CPU's of the same format and
# against the bf16 stage (largest difference over largest value), and a checkpoint with a NaN
# planted refused at load through CUDA. Summary in $OUT/summary.txt, logs in $OUT/run.tar.gz.
source scripts/device-unpack.sh
for t in parity parity_quantized pipeline memory; do
  [ -x /tmp/b/test-$t ] && { /tmp/b/test-$t --test-threads=1 > $R/test-$t.log 2>&1; echo "test-$t rc=$?" >> $R/summary.txt; grep "test result" $R/test-$t.log >> $R/summary.txt; grep -B2 -A12 "panicked" $R/test-$t.log | head -40 >> $R/summary.txt; }
done
S=/tmp/b/songloom; F=$SONGLOOM_FIXTURES; M=$F/tiny-music3
$S model quantize $M --weights 8bit --out $R/q8 > $R/quantize.log 2>&1
$S model quantize $M --weights 4bit-all --out $R/q4 >> $R/quantize.log 2>&1
for stage in lm depth; do
  for device in cpu cuda; do
    $S stage $stage --model $M --inputs $F/goldens/$stage.safetensors --out $R/$stage-bf16-$device.st --device $device >> $R/stage.log 2>&1
    $S stage $stage --model $M --weights 8bit --inputs $F/goldens/$stage.safetensors --out $R/$stage-w8-$device.st --device $device >> $R/stage.log 2>&1
    $S stage $stage --model $R/q8 --inputs $F/goldens/$stage.safetensors --out $R/$stage-q8-$device.st --device $device >> $R/stage.log 2>&1
    $S stage $stage --model $R/q4 --inputs $F/goldens/$stage.safetensors --out $R/$stage-q4-$device.st --device $device >> $R/stage.log 2>&1
  done
done
python3 - >> $R/summary.txt 2>&1 <<'PY'
import json, struct, numpy as np, os
R = "/tmp/run"
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n])
    return {k: np.frombuffer(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], np.float32)
            for k, v in h.items() if k != "__metadata__"}
def rel(a, b):
    return max(float(np.abs(a[k] - b[k]).max() / max(np.abs(b[k]).max(), 1e-30)) for k in b)
for stage in ["lm", "depth"]:
    for fmt in ["bf16", "w8", "q8", "q4"]:
        c, g = f"{R}/{stage}-{fmt}-cpu.st", f"{R}/{stage}-{fmt}-cuda.st"
        if not (os.path.exists(c) and os.path.exists(g)):
            print(stage, fmt, "MISSING output"); continue
        print(f"stage {stage} {fmt}: cuda vs cpu {rel(load(g), load(c)):.2e}; cuda vs bf16 cpu {rel(load(g), load(f'{R}/{stage}-bf16-cpu.st')):.2e}")
PY
# A NaN planted in the DiT's output projection: refused at load through CUDA, naming it.
cp -r $M $R/nan && python3 - <<'PY'
import json, struct, numpy as np, glob
def header(p):
    b = bytearray(open(p, "rb").read()); n = struct.unpack("<Q", b[:8])[0]; return b, n, json.loads(b[8:8 + n])
for p in sorted(glob.glob("/tmp/run/nan/transformer/*.safetensors")):
    b, n, h = header(p)
    name = next((k for k in h if k.startswith("proj_out") and k.endswith("weight")), None)
    if name: break
o = 8 + n + h[name]["data_offsets"][0]
b[o:o + 2] = b"\xc0\x7f" if h[name]["dtype"] == "BF16" else b[o:o + 2]
if h[name]["dtype"] == "F32": b[o:o + 4] = struct.pack("<f", float("nan"))
open(p, "wb").write(bytes(b))
PY
$S generate --model $R/nan --device cuda --prompt "a test" --lyrics "[verse]" --duration 2 --out $R/nan.wav > $R/nan.log 2>&1
echo "NaN checkpoint through cuda: rc=$? $(grep -o 'the DiT tensor[^;]*' $R/nan.log | head -1); wav written: $([ -e $R/nan.wav ] && echo yes || echo no)" >> $R/summary.txt
cat $R/summary.txt
cp $R/summary.txt $OUT/summary.txt
tar czf $OUT/run.tar.gz -C $R --exclude='*.st' --exclude=q8 --exclude=q4 --exclude=nan .
