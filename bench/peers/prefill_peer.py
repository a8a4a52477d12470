#!/usr/bin/env python3
"""Peer for benchmark "prefill": PyTorch SDPA causal attention, cuDNN backend, bf16.

Prints one JSON line per case of bench/prefill/prefill_bench.cu, with the identical case string:
{"bench":"prefill","case":...,"peer":"cudnn_bf16","peer_value":TFLOP/s}. The peer runs bf16 on
contiguous [B, H, S, D] tensors (it has no paged cache and no FP8); GQA is expanded to 32 KV
heads for SDPA (enable_gqa would fall off the cuDNN path). Causal FLOPs count as half:
4 * S * S * H * D / 2 per sequence. Cases the Hopper kernel serves appear again with the suffix
" hopper" (and, FP8 q, " hopper_fp8pv"), with the same peer value. Usage: python3 bench/peers/prefill_peer.py [--quick]
"""
import json
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

TOTAL_TOKENS = 16384
Q_HEADS = 32
# Kernel suffixes per (label, head_dim): the generic kernel's case ("") and the Hopper variants
# that serve it.
HOPPER_SERVED = {("fp8", 128)} | {(label, d) for label in ("bf16", "bf16q_fp8kv")
                                  for d in (64, 128, 256)}


def kernel_tags(label, d):
    if (label, d) not in HOPPER_SERVED:
        return ("",)
    return ("", "hopper", "hopper_fp8pv") if label == "fp8" else ("", "hopper")


def cases(quick):
    seq_lens = [4096] if quick else [1024, 2048, 4096, 8192, 16384]
    for label in ("fp8", "bf16", "bf16q_fp8kv"):
        for s in seq_lens:
            for page in (16, 64):
                yield label, TOTAL_TOKENS // s, s, 128, page
        for d in (64, 256):
            yield label, 2, 8192, d, 16


def case_name(label, b, s, d, page, kernel=""):
    return f"{label} b{b} s{s} h32/8 d{d} page{page} causal" + (f" {kernel}" if kernel else "")


def tflops(b, s, d):
    q, k, v = (torch.randn(b, Q_HEADS, s, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    run = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        for _ in range(3):
            run()
        torch.cuda.synchronize()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        stop.record()
        stop.synchronize()
        iterations = max(3, min(200, int(200.0 / max(start.elapsed_time(stop), 1e-3))))
        start.record()
        for _ in range(iterations):
            run()
        stop.record()
        stop.synchronize()
    ms = start.elapsed_time(stop) / iterations
    return 4.0 * s * s * Q_HEADS * d / 2.0 * b / (ms * 1e-3) / 1e12


def main():
    quick = "--quick" in sys.argv[1:]
    measured = {}
    for label, b, s, d, page in cases(quick):
        if (b, s, d) not in measured:
            measured[(b, s, d)] = tflops(b, s, d)
        for kernel in kernel_tags(label, d):
            print(json.dumps({"bench": "prefill", "case": case_name(label, b, s, d, page, kernel),
                              "peer": "cudnn_bf16", "peer_value": round(measured[(b, s, d)], 1)}),
                  flush=True)


if __name__ == "__main__":
    main()
