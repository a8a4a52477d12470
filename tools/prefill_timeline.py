#!/usr/bin/env python3
"""Reads the prefill timeline probe's traces (tools/prefill_timeline.patch applied in a scratch
build compiled with -DQUENCH_PREFILL_TIMELINE; the launcher writes the last persistent launch's
stamps to QUENCH_PREFILL_TRACE=FILE) and prints, per work item of the persistent kernel and per
consumer warpgroup: the wait for the item's Q rows (loop top -> Q-ready barrier), the wait for
its first K/V tile, its first Q K^T, the rest of its tile loop, the last P V and the epilogue, in
SM cycles (and us at the clock given by GHZ), overall and by the item's tile count.
Usage: prefill_timeline.py TRACE...   (132 CTAs x 64 items x 2 consumers x 8 stamps, uint64)
"""
import sys

import numpy as np

GHZ = 1.98  # SM clock under the traced runs (nvidia-smi during the eighth session's call)
for path in sys.argv[1:]:
    a=np.fromfile(path,dtype=np.uint64).reshape(132,64,2,8).astype(np.int64)
    print('==',path)
    ev={}
    rows=[]
    for cta in range(132):
        for c in range(2):
            prev_end=None
            for it in range(64):
                st=a[cta,it,c]
                if st[0]==0: break
                n=st[7]
                d=dict(arrive=st[0],qready=st[1],full0=st[2],qk0=st[3],loop=st[4],pv=st[5],epi=st[6])
                rows.append((cta,c,it,n,st[1]-st[0],st[2]-st[1],st[3]-st[2],st[4]-st[3],st[5]-st[4],st[6]-st[5],(st[0]-prev_end) if prev_end else 0, st[6]-st[0]))
                prev_end=st[6]
    r=np.array(rows)
    names=['qwait','full0wait','qk0','loop(rest)','lastpv','epilogue','gap_prev','total']
    print('items',len(r),'avg tiles %.2f'%r[:,3].mean())
    for i,nm in enumerate(names):
        col=r[:,4+i]
        print('%-11s mean %7.0f cyc = %5.2f us  median %7.0f  p90 %7.0f'%(nm,col.mean(),col.mean()/GHZ/1000,np.median(col),np.percentile(col,90)))
    # per-tile loop cost for items with n>=2: loop(rest)/(n-1)
    m=r[:,3]>=2
    print('loop per later tile: %.0f cyc'%((r[m,7]/(r[m,3]-1)).mean()))
    # per tile count breakdown
    for n in sorted(set(r[:,3]))[:10]:
        mm=r[:,3]==n
        print(' n=%2d count %5d total %6.0f  qwait %5.0f full0 %5.0f qk0 %5.0f loop %6.0f lastpv %5.0f epi %5.0f'%(n,mm.sum(),r[mm,11].mean(),r[mm,4].mean(),r[mm,5].mean(),r[mm,6].mean(),r[mm,7].mean(),r[mm,8].mean(),r[mm,9].mean()))
    # CTA timeline span
    start=a[:,0,:,0]; 
    last=[]
    for cta in range(132):
        for c in range(2):
            its=[it for it in range(64) if a[cta,it,c,0]!=0]
            if its: last.append(a[cta,its[-1],c,6]-a[cta,0,c,0])
    print('CTA span mean %.0f max %.0f cyc (%.1f / %.1f us)'%(np.mean(last),np.max(last),np.mean(last)/GHZ/1000,np.max(last)/GHZ/1000))
