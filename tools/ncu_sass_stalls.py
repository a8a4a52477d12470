#!/usr/bin/env python3
"""Where a kernel's warps wait, from an Nsight Compute source page exported as CSV.

Usage (on the GPU machine, then here):
  ncu --section WarpStateStats --section SourceCounters -o rep --kernel-name regex:NAME \
      --launch-skip N --launch-count 1 quench_bench --filter BENCH --case "CASE SUBSTRING"
  ncu -i rep.ncu-rep --page source --print-source sass --csv > k_sass.csv
  tools/ncu_sass_stalls.py k_sass.csv [TOP] [--mix]

Prints, per kernel in the file: the stall-sample share of each stall reason, the TOP hottest SASS
instructions (index, share, instruction, main stall reasons), and with --mix the executed
instruction mix by opcode, which with the kernel's duration gives issue-slot and pipe budgets.
"""
import collections
import csv
import sys


def read_kernels(path):
    kernels, header, current = [], None, None
    for row in csv.reader(open(path)):
        if not row:
            continue
        if row[0] == 'Kernel Name':
            current = {'name': row[1], 'rows': []}
            kernels.append(current)
        elif row[0] == 'Address':
            header = {name: i for i, name in enumerate(row)}
        elif current is not None and row[0].startswith('0x'):
            current['rows'].append(row)
    return kernels, header


def samples(row, header, column='Warp Stall Sampling (All Samples)'):
    return int(row[header[column]] or 0)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith('--')]
    if not args:
        sys.exit(__doc__)
    top = int(args[1]) if len(args) > 1 else 40
    kernels, header = read_kernels(args[0])
    stall_columns = [h for h in header if h.startswith('stall_') and 'Not Issued' not in h]
    for kernel in kernels:
        rows = kernel['rows']
        total = sum(samples(r, header) for r in rows)
        by_reason = collections.Counter()
        for r in rows:
            for c in stall_columns:
                by_reason[c] += samples(r, header, c)
        print(f"== {kernel['name'][:160]}\n   {len(rows)} SASS instructions, {total} samples")
        print('   ' + ', '.join(f'{c[6:]} {100 * v / max(total, 1):.1f}%'
                                 for c, v in by_reason.most_common(10)))
        hottest = sorted(range(len(rows)), key=lambda i: -samples(rows[i], header))[:top]
        for i in hottest:
            r = rows[i]
            reasons = sorted(((samples(r, header, c), c[6:]) for c in stall_columns), reverse=True)[:3]
            print(f'{i:6d} {100 * samples(r, header) / max(total, 1):5.1f}%  {r[1].strip()[:72]:72s} ' +
                  ' '.join(f'{name}:{n}' for n, name in reasons if n))
        if '--mix' in sys.argv:
            mix, executed = collections.Counter(), 0
            for r in rows:
                words = r[1].split()
                words = words[1:] if words and words[0].startswith('@') else words
                n = int(r[header['Instructions Executed']] or 0)
                mix[words[0].split('.')[0] if words else '?'] += n
                executed += n
            print(f'   executed warp-instructions: {executed}')
            for op, n in mix.most_common(25):
                print(f'   {op:12s} {n:14d} {100 * n / max(executed, 1):5.1f}%')


if __name__ == '__main__':
    main()
