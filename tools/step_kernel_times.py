#!/usr/bin/env python3
"""Kernel times of one decode step, from Nsight Compute's CSV of a `quench generate` run.

Reads `ncu --csv --metrics gpu__time_duration.sum ...` output (one row per profiled kernel, in
launch order; graph nodes are profiled one by one under --graph-profiling node) and takes the
last complete step: from the second-to-last token embedding (each step gathers its token
embeddings, then, before lm_head, its logit rows, through the same kernel) to the end. Prints
the kernels of that step grouped by name (count, total us) and their sum, which set beside the
step's wall time shows how much of the step is kernel time and how much the gaps between them.

    python3 tools/step_kernel_times.py ncu.csv [--with S]... [--without S]...

--with S / --without S (case-insensitive name substrings, repeatable): take the last step that
has a kernel matching every --with and none matching any --without instead (e.g. --with gemm
--without prefill: the last decode step that ran the FP8 GEMMs, where the run's final steps hold
only its last few sequences).
"""
import csv
import re
import sys
from collections import OrderedDict


def short(name: str) -> str:
    name = name.replace("<unnamed>", "").replace("(anonymous namespace)", "")
    name = re.sub(r"^void ", "", name)
    name = name.split("(")[0]        # argument list
    name = re.sub(r"<.*", "", name)  # template arguments
    return name.split("::")[-1].strip()


def main() -> int:
    args = sys.argv[1:]
    if not args or args[0].startswith("--"):
        print("usage: step_kernel_times.py NCU_CSV [--with S]... [--without S]...")
        return 2
    path, wanted, unwanted = args[0], [], []
    i = 1
    while i < len(args):
        if args[i] not in ("--with", "--without") or i + 1 >= len(args):
            print(f"step_kernel_times: unknown argument '{args[i]}'; allowed: --with S, --without S")
            return 2
        (wanted if args[i] == "--with" else unwanted).append(args[i + 1].lower())
        i += 2
    rows = []
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "nsecond")
        ns = value * {"nsecond": 1, "usecond": 1e3, "msecond": 1e6, "second": 1e9}.get(unit, 1)
        rows.append((short(r["Kernel Name"]), ns / 1e3))
    embeds = [i for i, (n, _) in enumerate(rows) if "embedding" in n]
    if len(embeds) < 4:
        print(f"step_kernel_times: {len(rows)} kernels, too few embedding launches to find a step")
        return 1
    # Steps from the end: each starts at its token embedding, the second-to-last embedding launch
    # before its end (its logit rows' gather is the last).
    starts = embeds[-2::-2]
    ends = [len(rows)] + starts[:-1]
    step = None
    for start, end in zip(starts, ends):
        names = [n.lower() for n, _ in rows[start:end]]
        if all(any(w in n for n in names) for w in wanted) and \
                not any(u in n for u in unwanted for n in names):
            step = rows[start:end]
            break
    if step is None:
        print(f"step_kernel_times: no step has kernels matching {wanted} and none matching {unwanted}")
        return 1
    groups = OrderedDict()
    for name, us in step:
        count, total = groups.get(name, (0, 0.0))
        groups[name] = (count + 1, total + us)
    print(f"{len(rows)} kernels profiled; the step: {len(step)} kernels, "
          f"{sum(us for _, us in step):.1f} us of kernel time")
    for name, (count, total) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        print(f"  {total:8.1f} us  {count:4d}x  {total / count:7.2f} us  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
