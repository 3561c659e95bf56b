"""Sums `ncu --metrics gpu__time_duration.sum --csv` output by kernel: calls, total and mean time."""
import collections
import csv
import sys

rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) == 15 and r[0] != "ID"]
scale = {"ns": 1e-3, "us": 1.0, "usecond": 1.0, "nsecond": 1e-3, "ms": 1e3, "msecond": 1e3}
total = collections.defaultdict(lambda: [0, 0.0])
for r in rows:
    name = r[4].split("(")[0].split("<")[0]
    total[name][0] += 1
    total[name][1] += float(r[14].replace(",", "")) * scale[r[13]]
grand = sum(t for _, t in total.values())
for name, (calls, t) in sorted(total.items(), key=lambda x: -x[1][1]):
    print(f"{name:40s} {calls:5d} calls {t:9.1f} us {t / calls:8.2f} us each {100 * t / grand:5.1f} %")
print(f"{'all kernels':40s} {sum(c for c, _ in total.values()):5d} calls {grand:9.1f} us")
