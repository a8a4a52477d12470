#!/usr/bin/env python3
"""Reads the prefill timeline probe's traces and prints where a work item's time goes.

The probe is tools/prefill_timeline.patch, applied in a scratch build compiled with
-DQUENCH_PREFILL_TIMELINE (never in main). Its launcher writes the last persistent launch's
stamps to QUENCH_PREFILL_TRACE=FILE: clock64 per CTA (132), work item (64), consumer warpgroup
(2) and stamp (24), uint64. Stamps, by index: 0 loop top; 1 items decoded (next and current) and
score transform done; 2 Q-ready barrier passed; 3 Q fragments loaded; 4 first tile's `full`
wait done; 5 first ping-pong turn taken; 6 first Q K^T waited; 7 the item's tile count; 8 tile
loop left; 9 last P V done; 10 epilogue stored; 11 next item's Q cp.async issued (right
after 3 where the consumers load it early, kEarlyNextQ; else in the tail); 12-15 each
warp's cp.async wait for the item's Q rows done (lane 0 of warps 0-3); 16-23 one steady
iteration (tile 6 of items with more than 8 tiles): its top, the previous P V waited, O joined
and P packed, `full` waited, turn taken, GEMMs issued, Q K^T waited, softmax done.

Usage: prefill_timeline.py TRACE...
Prints per phase the mean, median and 90th percentile in SM cycles over all items, and the
steady cost of a later tile of the loop.
"""
import sys

import numpy as np

CTAS, ITEMS, CONSUMERS, STAMPS = 132, 64, 2, 24


def phases(st, prev_end):
    """One item's phases (cycles) from its 16 stamps."""
    warps_ready = st[12:16].max()
    # The next item's Q issued before the first tile (kEarlyNextQ) or in the tail (0: last item).
    early = st[11] != 0 and st[11] < st[4]
    return {
        'n_tiles': st[7],
        'decode': st[1] - st[0],
        'q_rows_wait': warps_ready - st[1],
        'q_ready_barrier': st[2] - warps_ready,
        'q_fragments': st[3] - st[2],
        'early_next_q': (st[11] - st[3]) if early else 0,
        'first_full_wait': st[4] - (st[11] if early else st[3]),
        'first_turn': st[5] - st[4],
        'first_qk': st[6] - st[5],
        'loop_rest': st[8] - st[6],
        'tail_to_next_q': (st[11] - st[8]) if st[11] and not early else 0,
        'tail': st[9] - st[8],
        'epilogue': st[10] - st[9],
        'gap_after_previous': (st[0] - prev_end) if prev_end is not None else 0,
        'total': st[10] - st[0],
    }


def steady_phases(st):
    """Tile 6's iteration (cycles), or None where the item had <= 8 tiles."""
    if st[16] == 0 or st[23] == 0:
        return None
    return {
        'wait_previous_pv': st[17] - st[16],
        'join_and_pack': st[18] - st[17],
        'full_wait': st[19] - st[18],
        'turn_wait': st[20] - st[19],
        'issue': st[21] - st[20],
        'qk_wait': st[22] - st[21],
        'softmax': st[23] - st[22],
        'iteration': st[23] - st[16],
    }


def print_columns(rows):
    columns = {k: np.array([r[k] for r in rows], dtype=np.float64) for k in rows[0]}
    for name, values in columns.items():
        if name == 'n_tiles':
            continue
        print('%-19s mean %7.0f  median %7.0f  p90 %7.0f' %
              (name, values.mean(), np.median(values), np.percentile(values, 90)))
    return columns


def main(paths):
    for path in paths:
        stamps = np.fromfile(path, dtype=np.uint64).reshape(CTAS, ITEMS, CONSUMERS, STAMPS)
        stamps = stamps.astype(np.int64)
        rows = []
        steady = {0: [], 1: []}
        for cta in range(CTAS):
            for consumer in range(CONSUMERS):
                prev_end = None
                for item in range(ITEMS):
                    st = stamps[cta, item, consumer]
                    if st[0] == 0 or st[10] == 0:
                        break
                    rows.append(phases(st, prev_end))
                    one = steady_phases(st)
                    if one is not None:
                        steady[consumer].append(one)
                    prev_end = st[10]
        print('==', path)
        if not rows:
            print('no items traced')
            continue
        print('items %d, mean tiles %.2f' % (len(rows), np.mean([r['n_tiles'] for r in rows])))
        columns = print_columns(rows)
        for consumer in (0, 1):
            if steady[consumer]:
                print('-- steady iteration, consumer %d (%d items)' %
                      (consumer, len(steady[consumer])))
                print_columns(steady[consumer])
        later = columns['n_tiles'] >= 2
        if later.any():
            per_tile = columns['loop_rest'][later] / (columns['n_tiles'][later] - 1)
            print('loop per later tile %.0f cycles' % per_tile.mean())


if __name__ == '__main__':
    main(sys.argv[1:])
