#!/usr/bin/env python3
"""Reads the decode timeline probe's trace (tools/decode_timeline.patch, QUENCH_DECODE_TRACE=FILE)
and prints, per recorded launch: the CTAs' start-up (entry -> grid-dependency wait -> producer
start -> first TMA issue -> first landed tile), the producer's per-tile issue cost, issue-to-land
latencies, the consumers' compute and wait per tile, the epilogue, the exit spread by SM, the
landing rate over the launch (64-token tiles per microsecond, all CTAs), and one median CTA's
tile timeline.

Usage: tools/decode_timeline.py TRACE [TRACE ...]   (needs numpy)
Record layout: a header of 5 uint32 (grid x, y, z, ring stages, splits), then 1024 uint64 slots
per CTA (decode_trace.cuh in the patch names them)."""
import struct
import sys

import numpy as np

SLOTS = 1024
TRACED_TILES = 126


def records(path):
    data = open(path, 'rb').read()
    offset = 0
    while offset < len(data):
        gx, gy, gz, stages, splits = struct.unpack('5I', data[offset:offset + 20])
        size = gx * gy * gz * SLOTS * 8
        slots = np.frombuffer(data[offset + 20:offset + 20 + size], dtype=np.uint64)
        offset += 20 + size
        yield (gx, gy, gz, stages, splits), slots.reshape(-1, SLOTS).astype(np.int64)


def spread(x, qs=(0, 10, 50, 90, 100)):
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return 'n/a'
    return ' '.join('%7.2f' % np.percentile(x, q) for q in qs)


def report(name, dims, a):
    a = a[a[:, 0] > 0]  # CTAs that ran (padding and empty CTAs leave zeros)
    n = len(a)
    gt0, clk0, sm, ntiles, gt1, clk1 = a[:, 0], a[:, 1], a[:, 2], a[:, 3], a[:, 8], a[:, 7]
    ghz = np.median((clk1 - clk0) / np.maximum(gt1 - gt0, 1))  # clock cycles per ns
    us = lambda cycles: cycles / ghz / 1e3
    t0 = gt0.min()
    print('%s grid=%s stages=%d splits=%d ctas=%d clock=%.2f GHz tiles/cta=%s' %
          (name, dims[:3], dims[3], dims[4], n, ghz, np.unique(ntiles)))
    print('  (columns: min p10 median p90 max, microseconds)')
    print('  span, first entry -> last exit %.2f; entry skew %s' % ((gt1.max() - t0) / 1e3,
                                                                    spread((gt0 - t0) / 1e3)))
    print('  exit                         %s' % spread((gt1 - t0) / 1e3))
    print('  entry -> grid-dependency wait %s' % spread(us(a[:, 4] - clk0)))
    print('  entry -> producer start      %s' % spread(us(a[:, 5] - clk0)))
    tiles = min(int(ntiles.max()), TRACED_TILES)
    t = a[:, 16:16 + 8 * tiles].reshape(n, tiles, 8)
    valid = np.arange(tiles)[None, :] < ntiles[:, None]
    issue, full, w0_wait, w0_release = t[:, :, 1], t[:, :, 2:6], t[:, :, 6], t[:, :, 7]
    print('  producer start -> 1st issue  %s' % spread(us(issue[:, 0] - a[:, 5])))
    print('  1st issue -> 1st landed      %s' % spread(us(full[:, 0, 0] - issue[:, 0])))
    print('  producer per tile (wait+issue) %s' % spread(us(issue - t[:, :, 0])[valid]))
    waited = valid & ((full[:, :, 0] - w0_wait) > 200)  # warp 0 waited: it saw the landing
    waited[:, 0] = False
    print('  issue -> land where warp 0 waited (%.0f%% of tiles) %s' %
          (100 * waited.sum() / max(valid.sum(), 1), spread(us(full[:, :, 0] - issue)[waited])))
    print('  warp 0 compute per tile      %s' % spread(us(w0_release - full[:, :, 0])[valid]))
    print('  warp 0 wait per tile         %s' % spread(us(full[:, :, 0] - w0_wait)[valid]))
    print('  loop end -> exit (epilogue)  %s' % spread(us(clk1 - a[:, 6])))
    per_sm = np.bincount(sm, minlength=int(sm.max()) + 1)
    for count in np.unique(per_sm[sm]):
        m = per_sm[sm] == count
        print('  SMs holding %d CTAs: %d CTAs, exit %s' % (count, m.sum(), spread((gt1[m] - t0) / 1e3)))
    land = (a[:, 0:1] - t0) + (full[:, :, 0] - a[:, 1:2]) / ghz
    histogram, _ = np.histogram(land[valid] / 1e3, np.arange(0, (gt1.max() - t0) / 1e3 + 1, 1.0))
    print('  tiles landed per us:', ' '.join(str(x) for x in histogram))
    i = int(np.argsort(gt1 - gt0)[n // 2])
    print('  median CTA %d (SM %d), us from its entry: tile issue / landed / released' % (i, sm[i]))
    for k in range(min(int(ntiles[i]), tiles)):
        print('    %2d %7.2f %7.2f %7.2f' % (k, us(issue[i, k] - clk0[i]), us(full[i, k, 0] - clk0[i]),
                                           us(w0_release[i, k] - clk0[i])))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for path in sys.argv[1:]:
        for index, (dims, slots) in enumerate(records(path)):
            report('%s#%d' % (path, index), dims, slots)


if __name__ == '__main__':
    main()
