import sys, time, warnings
sys.path.insert(0,'benchmarks')
warnings.simplefilter('ignore')
from _common import load
from fusion_core.methods import create
from fusion_core.metrics import accuracy
for ds in sys.argv[1].split(','):
    a,t = load(ds)
    for kw in [dict()]:
        t0=time.time(); m = create('glad', **kw).fit(a)
        print(ds, kw, round(accuracy(m.labels_,t),4), m.n_iter_, m.converged_, round(time.time()-t0,2), m.result_.warnings, 'mono', all(a<=b+1e-9*abs(b) for a,b in zip(m.loss_history_, m.loss_history_[1:])))
