#!/usr/bin/env python3
"""PyTorch bf16 decode attention on the shapes of quench's "decode" benchmark (the peer).

Runs torch.nn.functional.scaled_dot_product_attention(enable_gqa=True) on contiguous bf16 K/V
([B, 8, L, 128]) with one bf16 query token per request ([B, 32, 1, 128]), through the cuDNN
backend where it accepts the shape, else the flash backend, and prints one JSON line per case
string of bench/decode/decode_bench.cu that has a bf16 output:
  {"bench":"decode","case":...,"peer":"cudnn_bf16"|"flash_bf16","peer_value":us}
Timing, as quench's bench times its kernels: a CUDA graph of GRAPH_CALLS calls, events around
each replay, the median over REPLAYS replays divided by GRAPH_CALLS (eager calls timed one by
one carry the launch and the library's host work, which at B1 x 1k is most of their time). The
calls rotate over enough K/V copies to read >= 256 MiB of distinct bytes (more than the 60 MiB
L2). Each line also carries "peer_eager_us": CUDA events around single eager calls, median of 30
after 5 warm-ups (the measure before graphs, kept for comparison); where a backend cannot be
captured in a graph, peer_value is that eager time and "peer_timing" says so.
Usage: python3 bench/peers/decode_peer.py [--quick]
"""
import json
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

HQ, HKV, HD = 32, 8, 128
WARMUP, RUNS = 5, 30
GRAPH_CALLS, REPLAYS = 32, 11
ROTATE_BYTES = 256 << 20
SHAPES = [(64, 4096), (128, 2048), (256, 2048), (16, 16384), (1, 32768), (2, 32768), (4, 32768),
          (8, 32768), (1, 131072), (2, 131072), (4, 131072), (8, 131072), (1, 1024)]
QUICK_SHAPES = [(64, 4096), (1, 32768), (1, 1024)]


def case_names(batch, seq_len):
    """The quench case strings with a bf16 output for this shape (see decode_bench.cu)."""
    names = []
    for kv in ("fp8_e4m3", "bf16"):
        for page in (16, 64):
            names.append(f"B{batch}xL{seq_len} kv={kv} page={page} out=bf16 hq32/hkv8 hd128")
        names.append(f"B{batch}xL{seq_len} kv={kv} page=16 out=bf16 hq32/hkv8 hd128 HND")
    return names


def time_us(fn, calls):
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    for i in range(WARMUP):
        fn(i % calls)
    times = []
    for i in range(RUNS):
        start.record()
        fn(i % calls)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3)
    times.sort()
    return times[len(times) // 2]


def time_us_graph(fn, calls):
    """Per-call time of fn(0), fn(1), ... captured GRAPH_CALLS at a time in one CUDA graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture stream, as torch's graphs ask
        for i in range(WARMUP):
            fn(i % calls)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(GRAPH_CALLS):
            fn(i % calls)
    graph.replay()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(REPLAYS):
        start.record()
        graph.replay()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3 / GRAPH_CALLS)
    times.sort()
    return times[len(times) // 2]


def run_shape(batch, seq_len):
    kv_bytes = 2 * batch * HKV * seq_len * HD * 2
    copies = max(1, -(-ROTATE_BYTES // kv_bytes))
    q = torch.randn(batch, HQ, 1, HD, device="cuda", dtype=torch.bfloat16)
    ks = [torch.randn(batch, HKV, seq_len, HD, device="cuda", dtype=torch.bfloat16)
          for _ in range(copies)]
    vs = [torch.randn(batch, HKV, seq_len, HD, device="cuda", dtype=torch.bfloat16)
          for _ in range(copies)]

    def call(i):
        return torch.nn.functional.scaled_dot_product_attention(q, ks[i], vs[i], enable_gqa=True)

    for backend, peer in ((SDPBackend.CUDNN_ATTENTION, "cudnn_bf16"),
                          (SDPBackend.FLASH_ATTENTION, "flash_bf16")):
        try:
            with sdpa_kernel([backend]):
                call(0)
                torch.cuda.synchronize()
                eager_us = time_us(call, copies)
        except RuntimeError as error:  # the backend refused the shape
            print(f"# {peer} B{batch}xL{seq_len}: {str(error).splitlines()[0]}", file=sys.stderr)
            continue
        timing = "cuda_graph"
        try:
            with sdpa_kernel([backend]):
                us = time_us_graph(call, copies)
        except RuntimeError as error:  # not capturable: keep the eager figure, and say so
            print(f"# {peer} B{batch}xL{seq_len} graph capture: {str(error).splitlines()[0]}",
                  file=sys.stderr)
            us, timing = eager_us, "eager"
            torch.cuda.synchronize()
        for name in case_names(batch, seq_len):
            print(json.dumps({"bench": "decode", "case": name, "peer": peer,
                              "peer_value": round(us, 3), "peer_timing": timing,
                              "peer_eager_us": round(eager_us, 3)}), flush=True)
        return
    print(f"# no SDPA backend ran B{batch}xL{seq_len}", file=sys.stderr)


def main():
    shapes = QUICK_SHAPES if "--quick" in sys.argv[1:] else SHAPES
    for batch, seq_len in shapes:
        run_shape(batch, seq_len)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
