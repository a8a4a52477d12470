#!/usr/bin/env python3
"""Cycle estimate of one pass through a kernel's wgmma tile loop, from `cuobjdump -sass` text.

Usage: tools/sass.sh FILE NAME > k.sass; tools/sass_chain.py k.sass [--warps 2] [--offset C]
       [--mufu-interval 8] [--pingpong N [--gemm 256] [--gemm-latency 30] [--bar-latency 20]]
       [--list]

The loop and its steady path are sass_loop_census.py's (the innermost backward branch around the
most HGMMA/QGMMA, long forward-skipped blocks left out). Each instruction's control bits (the
top 23 bits of its second 64-bit word: stall count, yield, the scoreboards it sets for its
result and for its operands' read, and the scoreboards it waits on) drive an in-order issue
model of one SM sub-partition:
  - an instruction issues no earlier than the previous one's issue plus its stall count, and
    no earlier than every scoreboard it waits on is released;
  - a variable-latency instruction (MUFU, SHFL, LDS, ...) releases its result scoreboard LATENCY
    cycles after it issues (table below, assumed, not measured), its read scoreboard 2 cycles
    after; MUFU issues at most every --mufu-interval cycles per sub-partition (4 lanes per
    cycle: 8 per warp instruction);
  - the waits for the tensor cores (WARPGROUP.DEPBAR), the ring barriers (SYNCS try-wait) and
    the named barriers (BAR) cost nothing here: the estimate is the loop's own instruction
    chain, which the device timeline adds those waits to.
With --warps 2 two warps run the same path on one sub-partition (the two consumers' warps of a
warp-specialized kernel), the second starting --offset cycles later; one instruction issues per
cycle, the oldest ready warp first, and they share the MUFU interval.
Prints the cycles of the pass per warp and where the issue waited (stall counts, scoreboards by
the opcode that set them, the MUFU interval).
With --pingpong N the two warps loop N times in the kernel's ping-pong turns, the tensor pipe
modelled (TensorModel), and the steady cycles per tile are printed. Not calibrated: the
forty-fourth session's FP8 P·V loop gave ~1790 cycles per tile where its H100 throughput
implies ~2300-2600 (the model leaves out the other three sub-partitions' warps of each
warpgroup, the producer warp, the ring barriers and shared-memory traffic). It ordered the
thirteenth session's two measured turn positions correctly, but modelled the forty-fourth
session's turn before the exponentials at -3.5% and the turn after Q K^T at -3% cycles per tile,
where the H100 measured both 1-1.5% slower: a hint for ranking loops, not a prediction.
"""
import collections
import re
import signal
import sys

sys.path.insert(0, __file__.rsplit('/', 1)[0])
from sass_loop_census import opcode, tile_loop  # noqa: E402

INSTRUCTION = re.compile(r'/\*([0-9a-f]{4,})\*/\s+(.*?);\s*/\* 0x([0-9a-f]{16}) \*/')
CONTROL = re.compile(r'^\s*/\* 0x([0-9a-f]{16}) \*/\s*$')
# Assumed result latencies of the variable-latency opcodes (cycles from issue).
LATENCY = {'MUFU': 18, 'SHFL': 24, 'LDS': 28, 'LDSM': 30, 'LDL': 40, 'LDG': 500, 'S2R': 20,
           'S2UR': 20, 'R2UR': 10, 'F2FP': 8, 'F2F': 12, 'I2F': 12, 'SYNCS': 20, 'POPC': 12,
           'FLO': 12, 'BREV': 12}
DEFAULT_LATENCY = 20


def read(path):
    """(address, text, control word) per instruction."""
    out = []
    pending = None
    for line in open(path):
        m = INSTRUCTION.search(line)
        if m:
            pending = (int(m.group(1), 16), m.group(2).strip())
            continue
        c = CONTROL.match(line)
        if c and pending:
            out.append((pending[0], pending[1], int(c.group(1), 16)))
            pending = None
    return out


def control(word):
    return {'stall': (word >> 41) & 0xF, 'wbar': (word >> 46) & 7, 'rbar': (word >> 49) & 7,
            'wait': (word >> 52) & 0x3F}


def steady_path(ins):
    lo, hi, skipped = tile_loop(ins)
    return [ins[i] for i in range(lo, hi + 1) if i not in skipped]


class TensorModel:
    """The ping-pong kernel's synchronisation, for --pingpong: a QGMMA marked gsb0 commits a group
    of `gemm` cycles (the pipe runs one group at a time, in issue order, done `latency` cycles
    later); WARPGROUP.DEPBAR.LE gsb0, N waits until at most N of the warp's groups are pending;
    BAR.SYNC (the turn) waits `bar_latency` cycles past the other consumer's BAR.ARV (consumer 1
    starts with one given, as the kernel's arrive before the loop)."""

    def __init__(self, gemm, latency, bar_latency):
        self.gemm, self.latency, self.bar_latency = gemm, latency, bar_latency
        self.free = 0
        self.pending = [[], []]  # completion times of each warp's committed groups, in order
        self.tokens = [[0], []]  # turn arrivals waiting for warp k's BAR.SYNC

    def earliest(self, k, op, text, at):
        """The earliest issue of the instruction, or None while it waits for an arrival."""
        if op == 'WARPGROUP' and 'DEPBAR' in text:
            allowed = int(text.split(',')[-1], 16)
            if len(self.pending[k]) > allowed:
                at = max(at, self.pending[k][len(self.pending[k]) - allowed - 1])
        if op == 'BAR' and '.SYNC' in text:
            if not self.tokens[k]:
                return None
            at = max(at, self.tokens[k][0] + self.bar_latency)
        return at

    def issue(self, k, op, text, cycle):
        if op == 'WARPGROUP' and 'DEPBAR' in text:
            self.pending[k] = [t for t in self.pending[k] if t > cycle]
        if op == 'BAR' and '.SYNC' in text:
            self.tokens[k].pop(0)
        if op == 'BAR' and '.ARV' in text:
            self.tokens[1 - k].append(cycle)
        if 'GMMA' in op and 'gsb0' in text:
            self.free = max(self.free, cycle) + self.gemm
            self.pending[k].append(self.free + self.latency)


def run(body, warps, iterations, offset, mufu_interval, tensor=None):
    """The in-order issue model of one sub-partition (module docstring): `warps` warps each pass
    through `body` `iterations` times, warp k starting k * offset cycles in; one instruction
    issues per cycle, the warp whose next instruction has waited longest first, and the warps
    share the MUFU interval. tensor: a TensorModel, or None to leave the tensor cores' and the
    barriers' waits out. Returns per warp its start, the cycle each pass issued its last
    instruction, when that pass's results were all in, and where its issue waited."""
    n = len(body)
    ctl = [control(w) for _, _, w in body]
    texts = [t for _, t, _ in body]
    ops = [opcode(t) for t in texts]
    pc = [0] * warps
    ready_at = [offset * k for k in range(warps)]  # earliest issue of the warp's next instruction
    start = list(ready_at)
    last_issue = [r - 1 for r in ready_at]
    board = [[0] * 6 for _ in range(warps)]  # scoreboard release times
    board_op = [[''] * 6 for _ in range(warps)]
    ends = [[] for _ in range(warps)]
    drained = [[] for _ in range(warps)]
    waited = [collections.Counter() for _ in range(warps)]
    last_mufu = -10**9
    cycle = 0
    while min(len(e) for e in ends) < iterations:
        for k in sorted(range(warps), key=lambda k: ready_at[k]):
            if len(ends[k]) >= iterations:
                continue
            i = pc[k]
            c = ctl[i]
            earliest, why = ready_at[k], None
            for b in range(6):
                if c['wait'] >> b & 1 and board[k][b] > earliest:
                    earliest, why = board[k][b], 'scoreboard ' + board_op[k][b]
            if ops[i] == 'MUFU' and last_mufu + mufu_interval > earliest:
                earliest, why = last_mufu + mufu_interval, 'MUFU interval'
            if tensor:
                synced = tensor.earliest(k, ops[i], texts[i], earliest)
                if synced is None:
                    continue
                if synced > earliest:
                    earliest, why = synced, 'tensor cores or turn'
            if earliest > cycle:
                continue
            # Issue at `cycle`. The cycles since the warp's previous issue beyond one: its stall
            # count's, then why it waited longer, then the other warp's issue.
            waited[k]['stall counts'] += max(ready_at[k] - last_issue[k] - 1, 0)
            if why:
                waited[k][why] += earliest - ready_at[k]
            waited[k]['the other warp issued'] += cycle - earliest
            last_issue[k] = cycle
            if ops[i] == 'MUFU':
                last_mufu = cycle
            if tensor:
                tensor.issue(k, ops[i], texts[i], cycle)
            if c['wbar'] != 7:
                board[k][c['wbar']] = cycle + LATENCY.get(ops[i], DEFAULT_LATENCY)
                board_op[k][c['wbar']] = ops[i]
            if c['rbar'] != 7:
                board[k][c['rbar']] = cycle + 2
                board_op[k][c['rbar']] = ops[i] + ' (read)'
            ready_at[k] = cycle + max(c['stall'], 1)
            pc[k] = (pc[k] + 1) % n
            if pc[k] == 0:
                ends[k].append(cycle)
                drained[k].append(max(ready_at[k], max(board[k])))
            break  # one instruction per cycle
        cycle += 1
    return start, ends, drained, waited


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under `| head`
    args = sys.argv[1:]
    opt = {'--warps': 1, '--offset': 0, '--mufu-interval': 8, '--pingpong': 0, '--gemm': 256,
           '--gemm-latency': 30, '--bar-latency': 20}
    for key in opt:
        if key in args:
            opt[key] = int(args[args.index(key) + 1])
    body = steady_path(read(args[0]))
    if opt['--pingpong']:
        tensor = TensorModel(opt['--gemm'], opt['--gemm-latency'], opt['--bar-latency'])
        _, ends, _, _ = run(body, 2, opt['--pingpong'], 0, opt['--mufu-interval'], tensor)
        half = opt['--pingpong'] // 2
        for k, e in enumerate(ends):
            period = (e[-1] - e[half]) / (len(e) - 1 - half)
            print(f'consumer {k}: {period:.0f} cycles per tile (iterations {half}..{len(e) - 1})')
        print(f'tensor pipe busy {2 * 2 * opt["--gemm"] / period:.0%} of a tile pair')
        return
    start, _, drained, waited = run(body, opt['--warps'], 1, opt['--offset'],
                                    opt['--mufu-interval'])
    print(f'steady path: {len(body)} instructions; warps {opt["--warps"]}, '
          f'offset {opt["--offset"]}, MUFU interval {opt["--mufu-interval"]}')
    for k in range(opt['--warps']):
        cycles = drained[k][0] - start[k]
        print(f'warp {k}: {cycles} cycles ({len(body) / cycles:.2f} instructions per cycle)')
        for why, n in waited[k].most_common(8):
            if n:
                print(f'    {why:28s} {n}')
    if '--list' in args:
        for a, t, w in body:
            c = control(w)
            print(f'  {a:05x} s{c["stall"]:2d} w{c["wbar"]} r{c["rbar"]} '
                  f'wait{c["wait"]:06b}  {t}')


if __name__ == '__main__':
    main()
