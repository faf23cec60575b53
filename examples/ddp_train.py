#!/usr/bin/env python3
"""A small PyTorch DDP training job that follows Tessera's checkpoint protocol (docs/checkpointing.md).

Every rank is one Tessera task. The script:
  * joins the process group from the torchrun-style env Tessera sets (MASTER_ADDR, MASTER_PORT,
    WORLD_SIZE, RANK; LOCAL_RANK picks the GPU when there is one) - gloo on CPU, nccl on GPUs;
  * trains a tiny linear model with DistributedDataParallel on data every rank can regenerate, so
    the result after N steps is the same however often the job was stopped and resumed;
  * saves a checkpoint every --checkpoint-every steps and when Tessera asks (the checkpoint signal,
    SIGUSR1 by default, or the file $TESSERA_CHECKPOINT_DIR/.request), then writes the path to
    $TESSERA_CHECKPOINT_DIR/.ack; a request whose mode line is `save` (periodic saves on spot
    nodes) goes on training, any other request (`stop`, or the signal) exits 0;
  * resumes from $TESSERA_RESUME_FROM when Tessera restarts it.

Run under Tessera, e.g.:
  tessera submit --tasks 4 --gpus 1 --name ddp -- python3 examples/ddp_train.py --steps 200 --out /tmp/ddp.json
"""
import argparse
import json
import os
import signal
import sys
import time

asked = False


def on_signal(signum, frame):
    global asked
    asked = True


# Before the slow torch import: a checkpoint request may come at any moment.
signal.signal(signal.SIGUSR1, on_signal)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402


def env_int(name):
    value = os.environ.get(name)
    if value is None:
        sys.exit(f"ddp_train: {name} is not set; run this under Tessera (or torchrun)")
    return int(value)


def batch(step, rank, world):
    # Deterministic data for (step, rank): y = 3x - 2 plus nothing random.
    g = torch.Generator().manual_seed(step * 1000 + rank)
    x = torch.randn(32, 1, generator=g)
    return x, 3 * x - 2


def save(path, model, opt, step):
    tmp = path + ".tmp"
    torch.save({"step": step, "model": model.module.state_dict(), "opt": opt.state_dict()}, tmp)
    os.replace(tmp, path)


def acknowledge(ckpt_dir, path):
    tmp = os.path.join(ckpt_dir, ".ack.tmp")
    with open(tmp, "w") as f:
        f.write(path + "\n")
    os.replace(tmp, os.path.join(ckpt_dir, ".ack"))


def read_request(ckpt_dir):
    # (request id, mode) of $TESSERA_CHECKPOINT_DIR/.request: lines are time, reason, mode
    # (`stop` when absent); None without a request.
    try:
        with open(os.path.join(ckpt_dir, ".request")) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    mode = lines[2].strip() if len(lines) > 2 else "stop"
    return ("\n".join(lines[:2]), mode)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--step-seconds", type=float, default=0.0, help="sleep per step (to make the job last)")
    p.add_argument("--checkpoint-every", type=int, default=0)
    p.add_argument("--out", help="rank 0 writes the final result here (JSON)")
    p.add_argument("--starts", help="every rank appends one line per start here (for tests)")
    a = p.parse_args()

    world, rank = env_int("WORLD_SIZE"), env_int("RANK")
    local_rank, local_world = env_int("LOCAL_RANK"), env_int("LOCAL_WORLD_SIZE")
    assert 0 <= rank < world and 0 <= local_rank < local_world, (rank, world, local_rank, local_world)
    ckpt_dir = os.environ.get("TESSERA_CHECKPOINT_DIR", ".")
    resume = os.environ.get("TESSERA_RESUME_FROM", "")
    if a.starts:
        with open(a.starts, "a") as f:
            f.write(f"{os.environ.get('TESSERA_JOB_ID')} {os.environ.get('TESSERA_ATTEMPT')} {rank} {os.getpid()}\n")

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend, init_method="env://", world_size=world, rank=rank)
    assert dist.get_world_size() == world and dist.get_rank() == rank
    # Every rank agrees on the world: the sum of ranks is world*(world-1)/2.
    t = torch.tensor([float(rank)])
    dist.all_reduce(t)
    assert int(t.item()) == world * (world - 1) // 2, f"all_reduce gave {t.item()}"

    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(1, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    step = 0
    if resume:
        state = torch.load(resume)
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step = state["step"]
        if rank == 0:
            print(f"resumed from {resume} at step {step}", flush=True)

    stop = False
    served = None  # the last `save` request answered (the agent removes .request shortly after)
    while step < a.steps:
        x, y = batch(step, rank, world)
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        step += 1
        if a.step_seconds:
            time.sleep(a.step_seconds)
        # Checkpoint asked by signal or file: all ranks agree before saving (max over ranks):
        # 2 = save and stop, 1 = save and go on.
        req = read_request(ckpt_dir)
        code = 2.0 if asked or (req and req[1] != "save") else 1.0 if req and req != served else 0.0
        want = torch.tensor([code])
        dist.all_reduce(want, op=dist.ReduceOp.MAX)
        stop = want.item() > 1
        if want.item() == 1:
            served = req
        periodic = (a.checkpoint_every and step % a.checkpoint_every == 0) or want.item() == 1
        if (stop or periodic) and step < a.steps:
            if rank == 0:
                path = os.path.join(ckpt_dir, f"ckpt-step-{step}.pt")
                save(path, model, opt, step)
                acknowledge(ckpt_dir, path)
                print(f"checkpoint at step {step}: {path}", flush=True)
            dist.barrier()
        if stop:
            break
        if rank == 0 and step % 10 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)

    if not stop and rank == 0 and a.out:
        w = model.module.weight.item()
        b = model.module.bias.item()
        with open(a.out + ".tmp", "w") as f:
            json.dump({"steps": step, "world_size": world, "weight": w, "bias": b, "resumed_from": resume}, f)
        os.replace(a.out + ".tmp", a.out)
        print(f"done: {step} steps, weight {w:.3f} bias {b:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
