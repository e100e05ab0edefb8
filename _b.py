from fusion_core.simulate import dawid_skene
from fusion_core.methods import create
from fusion_core.metrics import accuracy
import time, warnings
warnings.simplefilter('ignore')
for seed in range(4):
    sim = dawid_skene(n_items=2000, n_workers=600, n_classes=2, responses_per_item=5, class_prior=[.8,.2], spammers=60, worker_activity='zipf', seed=seed)
    out = []
    for m in ['ds', 'bds', 'ds1', 'mace', 'glad']:
        t=time.time(); e = create(m).fit(sim.responses)
        out.append(f"{m} {accuracy(e.labels_, sim.truth):.4f} ({time.time()-t:.2f}s)")
    e = create('bds').fit(sim.responses)
    print(seed, *out, 'mono', all(a<=b+1e-9*abs(b) for a,b in zip(e.loss_history_, e.loss_history_[1:])), e.n_iter_)
print(e.result_.details['hyperparameters'])
