"""Cartel detection (spec ``spectral.md`` §6; Parisi et al. 2014 §Cartel): :func:`detect_cartels` and its
:class:`CartelReport`.

* :mod:`.detector` — the detector (test, split, reassignment, merge, labels without the cartel);
  :mod:`.report` — :class:`CartelReport`;
  :mod:`.explain` — what a report means in plain words and tables (states, power, requirement, groups);
* :mod:`.bootstrap` — the parametric null and the (sequential) bootstrap test; :mod:`.statistic` — the test
  statistic for batches of replicates; :mod:`.pair_pattern` — moments on a fixed missingness pattern;
* :mod:`.analysis` — the working state (cached tests and rank fits, evidence, splits); :mod:`.eigen` — the
  warm-started and batched eigen-solvers.
"""

from fusion_core.diagnostics.cartels.detector import detect_cartels
from fusion_core.diagnostics.cartels.explain import CartelFinding, explain_cartels
from fusion_core.diagnostics.cartels.report import CartelReport, CartelState, CartelStatus

__all__ = ["CartelFinding", "CartelReport", "CartelState", "CartelStatus", "detect_cartels", "explain_cartels"]
