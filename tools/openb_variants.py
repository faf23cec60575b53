#!/usr/bin/env python3
"""Openb-like pod lists that stress one dimension each, derived from an openb pod list.

The public data holds three openb lists (default, gpushare40, multigpu50). The FGD artifact has more
(GPU-model constraints, CPU-heavy, sharing-heavy, multi-GPU-heavy) that are not in ../shared/data.
This writes stand-ins for them, drawn from the given list with fixed seeds, for `tessera sim alloc
--pods`. They are generated, not the artifact's lists: compare policies on them, not with published
figures.

  python3 tools/openb_variants.py --pods ../shared/data/openb/openb_pod_list_default.csv \
      --nodes ../shared/data/openb/openb_node_list_gpu_node.csv --out /tmp/variants

Writes gpuspec10 and gpuspec33 (10% / 33% of GPU pods name one or two GPU models, drawn in
proportion to the nodes that have them), cpu200 (every CPU-only pod twice), gpushare80 (60% of
whole one-GPU pods become shares, with milli drawn from the list's own shares) and multigpu30 (30%
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

    for pct in (10, 33):
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

    out = []
    for r in rows:
        out.append(r)
        if not gpu(r):
            out.append(dict(r))
    write(a.out, "cpu200", fields, out)

    shares = [int(r["gpu_milli"]) for r in rows if int(r["num_gpu"]) == 1 and int(r["gpu_milli"]) < 1000]
    rng = random.Random(8)
    out = []
    for r in rows:
        r = dict(r)
        if shares and whole_one(r) and rng.random() < 0.6:
            r["gpu_milli"] = str(rng.choice(shares))
        out.append(r)
    write(a.out, "gpushare80", fields, out)

    rng = random.Random(9)
    out = []
    for r in rows:
        r = dict(r)
        if whole_one(r) and rng.random() < 0.3:
            g = rng.choice([2, 4, 8])
            r["num_gpu"] = str(g)
            r["cpu_milli"] = str(int(r["cpu_milli"]) * g // 2)
            r["memory_mib"] = str(int(r["memory_mib"]) * g // 2)
        out.append(r)
    write(a.out, "multigpu30", fields, out)


if __name__ == "__main__":
    main()
