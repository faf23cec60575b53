#!/usr/bin/env python3
"""Random scheduling scenarios: generates small clusters, queue trees (guarantees in "any" and in
model classes, limits), priority classes, MIG, checkpoints, topology, node failures and drains, and
runs each through `tessera sim scenario` with the invariants on (docs/scenarios.md).

Hard failures make the exit status non-zero: a cluster invariant broken, a gang running partially,
decisions that never settle at one time, events that never run out (a livelock), a crash or an
error. Soft findings (a guarantee not restored within the grace, one job preempted for another and
back) are counted and listed with --verbose: the invariant's oracle cannot see every shape, so they are leads to read, not verdicts.

  tools/random_scenarios.py --tessera build/bin/tessera --seeds 1:60 [--keep DIR] [--verbose] [--varied 0.3]
"""
import argparse, os, random, subprocess, sys, tempfile

HARD = ("invariant broken", "runs partially", "never settle", "events never run out")


def gen(seed, varied=0.0):
    r=random.Random(seed)
    rv=random.Random(seed+1000003)
    models=['H100-80GB-SXM','A100-80GB']
    nn=r.randint(2,4)
    nodes=[]
    for i in range(nn):
        m=r.choice(models) if r.random()<0.5 else models[0]
        g=r.choice([4,8])
        mig=''
        if r.random()<0.2: mig=', mig_gpus: [0]'
        nodes.append(f'  - {{name: n{i}, gpu_model: {m}, gpus: {g}, cpu: 128000, memory: 1048576, path: [l{i%2}]{mig}}}')
    cap={}
    for n in nodes:
        pass
    nq=r.randint(2,4)
    queues=[]; leaves=[]
    org=r.random()<0.4
    orgg={}
    for i in range(nq):
        parent=', parent: org' if org and i<2 else ''
        gtxt=''
        if r.random()<0.6:
            mdl=r.choice(models+['any'])
            amt=r.choice([1,2,4,8,16])*1000
            gtxt=f', guaranteed: {{{mdl}: {amt}}}'
            if parent: orgg[mdl]=orgg.get(mdl,0)+amt
        ltxt=''
        if r.random()<0.15:
            ltxt=f', limit: {{any: {max(r.choice([8,16,24])*1000, amt if gtxt else 0)}}}'
        queues.append(f'  - {{name: q{i}{parent}{gtxt}{ltxt}}}')
        leaves.append(f'q{i}')
    if org:
        g=', '.join(f'{k}: {v}' for k,v in orgg.items())
        queues.insert(0,'  - {name: org'+(f', guaranteed: {{{g}}}' if g else '')+'}')
    cfg=[]
    if r.random()<0.4: cfg.append('dynamic_mig: true'); cfg.append('mig: {reconfigure_cost: 60}')
    cfg.append('reservation_hold: '+r.choice(['made','due','off']))
    if r.random()<0.3: cfg.append('defragment: false')
    if r.random()<0.3: cfg.append('topology_wait: 600')
    if r.random()<0.3: cfg.append('in_queue_las: true')
    jobs=[]
    nj=r.randint(8,30)
    for k in range(nj):
        at=r.randint(0,6000)
        q=r.choice(leaves)
        cls=r.choices(['research','production-training','production-inference','preemptible'],[6,2,1,1])[0]
        dur=r.choice([300,1200,3600,7200,20000])
        parts=[f'name: j{k}',f'at: {at}',f'queue: {q}',f'class: {cls}',f'duration: {dur}']
        if r.random()<0.15 and 'dynamic_mig: true' in cfg:
            parts.append('mig: '+r.choice(['1g.10gb','2g.20gb','3g.40gb']))
            parts.append('kind: inference')
        else:
            parts.append(f'gpus: {r.choice([1,1,2,4,8])}')
            if r.random()<0.3: parts.append(f'tasks: 2')
            if varied and rv.random()<varied:  # tasks that differ (own stream: other draws unchanged)
                sizes=[rv.choice([0,1,2,4,8]) for _ in range(rv.randint(2,4))]
                parts=[p for p in parts if not p.startswith(('gpus:','tasks:'))]
                parts.append('tasks: ['+', '.join(f'{{gpus: {g}}}' if g else '{gpus: 0, cpu: 1000}' for g in sizes)+']')
            if r.random()<0.3: parts.append('topology: '+r.choice(['required:leaf','preferred:node']))
            if r.random()<0.3: parts.append('models: ['+', '.join(r.sample(models, r.randint(1,2)))+']')
        if r.random()<0.6:
            parts.append(f'checkpoint: {{interval: 600, save_cost: {r.choice([10,60,200])}, restart_cost: {r.choice([0,60,120])}, grace: 300}}')
        if r.random()<0.3: parts.append(f'expected_runtime: {dur}')
        jobs.append('  - {'+', '.join(parts)+'}')
    events=[]
    if r.random()<0.3:
        t=r.randint(500,5000); events.append(f'  - {{at: {t}, node_down: n0}}'); events.append(f'  - {{at: {t+r.randint(600,4000)}, node_up: n0}}')
    if r.random()<0.2:
        t=r.randint(500,5000); events.append(f'  - {{at: {t}, drain: n1}}'); events.append(f'  - {{at: {t+2000}, uncordon: n1}}')
    y=f'name: fuzz {seed}\nlevels: [leaf]\nconfig: {{{", ".join(cfg)}}}\nnodes:\n'+'\n'.join(nodes)+'\nqueues:\n'+'\n'.join(queues)+'\njobs:\n'+'\n'.join(jobs)+'\n'
    if events: y+='events:\n'+'\n'.join(events)+'\n'
    y+='expect:\n  - {at: 0, mig_changes_at_most: 1000}\n'
    return y


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tessera", required=True, help="path to the tessera binary")
    ap.add_argument("--seeds", default="1:60", help="A:B, the seeds A..B-1")
    ap.add_argument("--keep", help="write the scenarios here (else a temporary directory)")
    ap.add_argument("--verbose", action="store_true", help="list soft findings too")
    ap.add_argument("--varied", type=float, default=0.0,
                    help="probability that a job's tasks differ (a list of per-task GPU counts); 0 keeps each seed's scenario as before")
    a = ap.parse_args()
    lo, hi = (int(x) for x in a.seeds.split(":"))
    out = a.keep or tempfile.mkdtemp(prefix="tessera-random-")
    os.makedirs(out, exist_ok=True)
    hard, soft = [], []
    for seed in range(lo, hi):
        path = os.path.join(out, f"random-{seed}.yaml")
        with open(path, "w") as f:
            f.write(gen(seed, a.varied))
        r = subprocess.run([a.tessera, "sim", "scenario", path], capture_output=True, text=True, timeout=300)
        text = r.stdout + r.stderr
        if r.returncode == 0:
            continue
        if "FAIL" not in text:  # an error or a crash, not a failed check
            hard.append(f"{path}: exit {r.returncode}: {text.strip()[-400:]}")
            continue
        for line in text.splitlines():
            line = line.strip()
            if not line.startswith("t="):
                continue
            (hard if any(h in line for h in HARD) else soft).append(f"{path}: {line}")
    print(f"{hi - lo} random scenarios in {out}: {len(hard)} hard failures, {len(soft)} soft findings")
    for h in hard:
        print("HARD", h)
    if a.verbose:
        for s in soft:
            print("soft", s)
    return 1 if hard else 0


if __name__ == "__main__":
    sys.exit(main())
