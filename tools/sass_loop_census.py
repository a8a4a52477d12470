#!/usr/bin/env python3
"""Instruction census of a kernel's wgmma tile loop, from `cuobjdump -sass` text.

Usage: cuobjdump -sass kernel.cubin > k.sass; tools/sass_loop_census.py k.sass [--list]

The loop is the innermost backward branch (no EXIT inside) that encloses the most HGMMA/QGMMA
instructions. Forward branches inside it that skip more than MIN_SKIP instructions (the
causal/window mask pass, the bf16 O rescale that is skipped when no row max changed) are left
out of the "steady" count and reported with their sizes, so the count is one unmasked tile.
"""
import collections
import re
import signal
import sys

MIN_SKIP = 60
LINE = re.compile(r'/\*([0-9a-f]{4,})\*/\s+(.*?);')
KINDS = [
    ('HGMMA/QGMMA', ('HGMMA', 'QGMMA')),
    ('FFMA', ('FFMA',)), ('FMUL', ('FMUL',)), ('FADD', ('FADD',)), ('FMNMX', ('FMNMX',)),
    ('MUFU', ('MUFU',)), ('FSETP/FSEL', ('FSETP', 'FSEL')), ('convert', ('F2FP', 'F2F', 'I2F')),
    ('SHFL', ('SHFL',)), ('MOV/PRMT', ('MOV', 'PRMT')),
    ('int ALU', ('IMAD', 'IADD3', 'LEA', 'LOP3', 'SHF', 'ISETP', 'SEL', 'VIADD', 'IMNMX',
                 'VIMNMX', 'PLOP3', 'VIADDMNMX')),
    ('uniform', ('U', 'R2UR', 'S2UR')),
    ('sync', ('BAR', 'SYNCS', 'WARPGROUP', 'WARPSYNC', 'DEPBAR', 'MEMBAR', 'FENCE')),
    ('branch', ('BRA', 'BSSY', 'BSYNC', 'EXIT')),
]


def branch_target(text):
    m = re.search(r'BRA(?:\.\S+)?\s+(?:!?U?P\d, )?0x([0-9a-f]+)', text)
    return int(m.group(1), 16) if m else None


def opcode(text):
    return re.sub(r'^@!?U?P[T\d]+\s+', '', text).split()[0].split('.')[0]


def tile_loop(ins):
    """The tile loop of instructions ins [(address, text, ...)]: its first and last index and the
    indices of the long forward-skipped blocks inside it (printed as they are found)."""
    index = {x[0]: i for i, x in enumerate(ins)}
    best = None
    for i, x in enumerate(ins):
        target = branch_target(x[1])
        if target is None or target >= x[0]:
            continue
        lo = index[target]
        if any(ins[j][1].startswith('EXIT') or ' EXIT' in ins[j][1] for j in range(lo, i + 1)):
            continue
        n = sum('GMMA' in ins[j][1] for j in range(lo, i + 1))
        if best is None or n > best[0] or (n == best[0] and i - lo < best[2] - best[1]):
            best = (n, lo, i)
    _, lo, hi = best
    skipped = set()
    for i in range(lo, hi + 1):
        target = branch_target(ins[i][1])
        if target is not None and ins[i][0] < target <= ins[hi][0] and index[target] - i > MIN_SKIP:
            print(f'skipped block after {ins[i][0]:#x}: {index[target] - i - 1} instructions')
            skipped.update(range(i + 1, index[target]))
    return lo, hi, skipped


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`
    ins = [(int(m.group(1), 16), m.group(2).strip())
           for m in map(LINE.search, open(sys.argv[1])) if m]
    lo, hi, skipped = tile_loop(ins)
    body = [ins[i][1] for i in range(lo, hi + 1) if i not in skipped]
    print(f'loop {ins[lo][0]:#x}..{ins[hi][0]:#x}: {hi - lo + 1} instructions, '
          f'steady (skipped blocks left out) {len(body)}')
    counts = collections.Counter()
    for t in body:
        op = opcode(t)
        kind = next((k for k, prefixes in KINDS if op.startswith(prefixes)), op)
        counts[kind] += 1
    for kind, n in counts.most_common():
        print(f'  {kind:12s} {n}')
    if '--list' in sys.argv:
        for t in body:
            print('   ', t)


if __name__ == '__main__':
    main()
