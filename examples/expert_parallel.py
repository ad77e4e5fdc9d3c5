#!/usr/bin/env python3
"""Expert parallelism with fp8moe and torch.distributed.

Each of W ranks holds E/W experts (local_expert_offset = rank*E/W, local_num_experts = E/W) and its own
batch of tokens. Per layer: all-gather every rank's tokens and router logits, run the local experts on all
tokens (routing always looks at all E experts; the plugin computes only the local slots and writes zeros
elsewhere), then reduce-scatter the fp32 partial outputs so each rank gets the sum for its own tokens.
The result is checked against one process running all E experts on the same tokens.

    python3 examples/expert_parallel.py --world-size 4                 # gloo, CPU processes
    python3 examples/expert_parallel.py --world-size 2 --device cuda   # NCCL, one GPU per rank

Needs torch and the fp8moe package (pip install ./python, or PYTHONPATH=python with FP8MOE_LIBRARY set).
Prints the agreement figure and exits non-zero when the ranks disagree with the single-process run.
"""
import argparse
import os
import socket
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import fp8moe

# A DeepSeek-V3-shaped layer, reduced so that it runs in seconds on a CPU.
E, K, N_GROUP, TOPK_GROUP, SCALE = 32, 8, 8, 4, 2.5
H, I, TOKENS_PER_RANK = 256, 128, 8
FMT = "FP8_BLOCK128"


def make_experts(device):
    """The whole model's experts, identical on every rank (same seed)."""
    g = torch.Generator().manual_seed(1234)
    codes = lambda *shape: (torch.randint(0, 64, shape, generator=g, dtype=torch.uint8)  # noqa: E731
                            | (torch.randint(0, 2, shape, generator=g, dtype=torch.uint8) << 7))
    return dict(
        w13=codes(E, 2 * I, H).view(torch.float8_e4m3fn).to(device),
        w13_scale=(torch.rand(E, 2 * I // 128, H // 128, generator=g) + 0.5).div(32).to(device),
        w2=codes(E, H, I).view(torch.float8_e4m3fn).to(device),
        w2_scale=(torch.rand(E, H // 128, I // 128, generator=g) + 0.5).div(16).to(device),
        bias=(torch.rand(E, generator=g) * 0.2 - 0.1).to(device),
    )


def make_tokens(rank, device):
    """This rank's own batch: hidden states and router logits."""
    g = torch.Generator().manual_seed(100 + rank)
    hidden = (torch.rand(TOKENS_PER_RANK, H, generator=g) * 2 - 1).to(torch.bfloat16).to(device)
    logits = torch.randn(TOKENS_PER_RANK, E, generator=g).to(device)
    return hidden, logits


def moe(hidden, logits, experts, offset, count):
    sl = slice(offset, offset + count)
    return fp8moe.fused_moe(
        hidden, logits, w13=experts["w13"][sl], w13_scale=experts["w13_scale"][sl], w2=experts["w2"][sl],
        w2_scale=experts["w2_scale"][sl], routing="DEEPSEEK_V3", top_k=K, n_group=N_GROUP, topk_group=TOPK_GROUP,
        routed_scaling_factor=SCALE, routing_bias=experts["bias"], quant_format=FMT, num_experts=E,
        local_expert_offset=offset, local_num_experts=count, out_dtype=torch.float32)


def reduce_scatter(partial, world):
    """Sum of every rank's [W*T, H] partial, this rank's [T, H] rows (all-reduce where the backend has no
    reduce-scatter, as older gloo builds do)."""
    mine = torch.empty(partial.shape[0] // world, partial.shape[1], dtype=partial.dtype, device=partial.device)
    try:
        dist.reduce_scatter_tensor(mine, partial)
        return mine
    except (RuntimeError, NotImplementedError, ValueError):
        dist.all_reduce(partial)
        return partial.chunk(world)[dist.get_rank()].clone()


def expert_parallel_layer(hidden, logits, experts, rank, world):
    per_rank = E // world
    all_hidden = torch.empty(world * hidden.shape[0], H, dtype=hidden.dtype, device=hidden.device)
    all_logits = torch.empty(world * logits.shape[0], E, dtype=logits.dtype, device=logits.device)
    dist.all_gather_into_tensor(all_hidden, hidden)
    dist.all_gather_into_tensor(all_logits, logits)
    partial = moe(all_hidden, all_logits, experts, rank * per_rank, per_rank)  # fp32 partial sums
    return reduce_scatter(partial, world).to(torch.bfloat16)


def worker(rank, world, device_kind, port, results):
    if device_kind == "cuda":
        torch.cuda.set_device(rank)
        device, backend = torch.device("cuda", rank), "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    try:
        experts = make_experts(device)
        hidden, logits = make_tokens(rank, device)
        ep = expert_parallel_layer(hidden, logits, experts, rank, world)
        single = moe(hidden, logits, experts, 0, E).to(torch.bfloat16)  # this rank's tokens, all experts
        diff = (ep.float() - single.float()).abs().max().item()
        rel = diff / max(single.float().abs().max().item(), 1e-30)
        same = int((ep.view(torch.int16) == single.view(torch.int16)).sum().item())
        results[rank] = (rel, same, ep.numel(), fp8moe.context(device.type, device.index or 0).backend)
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--tolerance", type=float, default=1e-2,
                        help="largest accepted max|EP - single| / max|single| (bf16 rounding of fp32 sums)")
    args = parser.parse_args()
    if E % args.world_size:
        parser.error(f"--world-size must divide the {E} experts")
    if args.device == "cuda" and torch.cuda.device_count() < args.world_size:
        parser.error(f"--device cuda needs {args.world_size} GPUs, found {torch.cuda.device_count()}")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    results = mp.Manager().dict()
    mp.spawn(worker, args=(args.world_size, args.device, free_port(), results), nprocs=args.world_size)
    worst = max(r[0] for r in results.values())
    same = sum(r[1] for r in results.values())
    total = sum(r[2] for r in results.values())
    backend = results[0][3]
    print(f"expert_parallel: {args.world_size} ranks ({'nccl' if args.device == 'cuda' else 'gloo'}, fp8moe "
          f"{backend} backend), E={E} experts ({E // args.world_size} per rank), {TOKENS_PER_RANK} tokens per "
          f"rank, DEEPSEEK_V3 top-{K}, {FMT}")
    print(f"agreement with one process running all experts: max relative difference {worst:.3e}, "
          f"{same}/{total} outputs bit-identical ({100.0 * same / total:.2f}%)")
    ok = worst <= args.tolerance
    print(f"expert_parallel: {'OK' if ok else 'FAILED'} (tolerance {args.tolerance:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
