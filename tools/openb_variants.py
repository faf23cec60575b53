#!/usr/bin/env python3
"""Openb-like pod lists that stress one dimension each, derived from an openb pod list.

The public data holds three openb lists (default, gpushare40, multigpu50). The FGD artifact has more
(GPU-model constraints, CPU-heavy, sharing-heavy, multi-GPU-heavy) that are not in ../shared/data.
This writes stand-ins for them, drawn from the given list with fixed seeds, for `tessera sim alloc
--pods`. They are generated, not the artifact's lists: compare policies on them, not with published
figures.

  python3 tools/openb_variants.py --pods ../shared/data/openb/openb_pod_list_default.csv \
      --nodes ../shared/data/openb/openb_node_list_gpu_node.csv --out /tmp/variants

Writes gpuspec10, 20, 25 and 33 (that % of GPU pods name one or two GPU models, drawn in
proportion to the nodes that have them), cpu050, cpu200 and cpu250 (every CPU-only pod 0.5, 2 or
2.5 times: the fraction as a draw), gpushare60, 80 and 100 (30%, 60% or all of the whole one-GPU
pods become shares, with milli drawn from the list's own shares) and multigpu20, 30 and 40 (that %
of whole one-GPU pods ask 2, 4 or 8 GPUs, with CPU and memory scaled by half the GPU count).
"""
import argparse
import csv
import os
import random


def write(out_dir, name, fields, rows):
    path = os.path.join(out_dir, name + ".csv")
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for i, r in enumerate(rows):
            r = dict(r)
            r["name"] = f"{name}-pod-{i:05d}"
            w.writerow(r)
    print(path, len(rows), "pods")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", required=True, help="openb pod list CSV to derive from")
    ap.add_argument("--nodes", required=True, help="openb node list CSV (for the GPU models and their node counts)")
    ap.add_argument("--out", required=True, help="directory to write the lists to")
    a = ap.parse_args()
    with open(a.pods) as f:
        rows = list(csv.DictReader(f))
    with open(a.nodes) as f:
        models = [n["model"] for n in csv.DictReader(f) if n["model"]]
    if not rows or not models:
        raise SystemExit("no pods or no GPU nodes")
    fields = list(rows[0].keys())
    os.makedirs(a.out, exist_ok=True)
    gpu = lambda r: int(r["num_gpu"]) > 0
    whole_one = lambda r: int(r["num_gpu"]) == 1 and int(r["gpu_milli"]) == 1000

    for pct in (10, 20, 25, 33):
        rng = random.Random(pct)
        out = []
        for r in rows:
            r = dict(r)
            if gpu(r) and rng.random() < pct / 100:
                named = []
                for _ in range(1 + rng.randrange(2)):
                    m = rng.choice(models)
                    if m not in named:
                        named.append(m)
                r["gpu_spec"] = "|".join(named)
            out.append(r)
        write(a.out, f"gpuspec{pct}", fields, out)

    for times in (50, 200, 250):  # per cent
        rng = random.Random(7)
        out = []
        for r in rows:
            if gpu(r):
                out.append(r)
                continue
            n = times // 100 + (1 if times % 100 and rng.random() < times % 100 / 100 else 0)
            out.extend(dict(r) for _ in range(n))
        write(a.out, f"cpu{times:03d}", fields, out)

    shares = [int(r["gpu_milli"]) for r in rows if int(r["num_gpu"]) == 1 and int(r["gpu_milli"]) < 1000]
    for name, part in (("gpushare60", 0.3), ("gpushare80", 0.6), ("gpushare100", 1.0)):
        rng = random.Random(8)
        out = []
        for r in rows:
            r = dict(r)
            if shares and whole_one(r) and rng.random() < part:
                r["gpu_milli"] = str(rng.choice(shares))
            out.append(r)
        write(a.out, name, fields, out)

    for pct in (20, 30, 40):
        rng = random.Random(9)
        out = []
        for r in rows:
            r = dict(r)
            if whole_one(r) and rng.random() < pct / 100:
                g = rng.choice([2, 4, 8])
                r["num_gpu"] = str(g)
                r["cpu_milli"] = str(int(r["cpu_milli"]) * g // 2)
                r["memory_mib"] = str(int(r["memory_mib"]) * g // 2)
            out.append(r)
        write(a.out, f"multigpu{pct}", fields, out)


if __name__ == "__main__":
    main()
