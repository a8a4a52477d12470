#!/usr/bin/env python3
"""Joins quench_bench's JSON lines with the peers' (PyTorch/cuDNN) lines measured in the same run.

  merge_bench_results.py RAW.jsonl PEERS.jsonl > MERGED.jsonl   # adds peer / peer_value by (bench, case)
  merge_bench_results.py --table MERGED.jsonl                   # prints a short table
"""
import json
import sys


def read_jsonl(path):
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    return rows


def merge(raw_path, peers_path):
    peers = {}
    for p in read_jsonl(peers_path):
        peers[(p["bench"], p["case"])] = p
    for r in read_jsonl(raw_path):
        p = peers.get((r["bench"], r["case"]))
        if p is not None and "peer_value" not in r:
            r["peer"] = p["peer"]
            r["peer_value"] = p["peer_value"]
            for key in ("peer_metric", "peer_timing", "peer_eager_us"):
                if key in p:
                    r[key] = p[key]
        print(json.dumps(r))


def table(path):
    rows = read_jsonl(path)
    print(f"{'bench':<12} {'case':<60} {'value':>9} {'metric':<8} {'%ceil':>6} {'peer':>9}")
    for r in rows:
        pct = f"{100 * r['value'] / r['ceiling']:.0f}%" if r.get("ceiling") else "-"
        peer = f"{r['peer_value']:.3g}" if "peer_value" in r else "-"
        print(f"{r['bench']:<12} {r['case'][:60]:<60} {r['value']:>9.3f} {r['metric']:<8} {pct:>6} {peer:>9}")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--table":
        table(sys.argv[2])
    elif len(sys.argv) == 3:
        merge(sys.argv[1], sys.argv[2])
    else:
        sys.exit(__doc__)
