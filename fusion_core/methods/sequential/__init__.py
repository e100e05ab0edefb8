"""Sequential family: hidden-Markov label models for sequences (Traganitis & Giannakis §4, App. A; spec §2.3).

* :mod:`.inference`: packed, length-sorted forward–backward and Viterbi (pure inference);
* :mod:`.emission`: the annotator-Markov emission's response contexts;
* :mod:`.transitions`: the transition matrix by lagged moments (Alg. 2);
* :mod:`.model`: Baum–Welch EM steps (Alg. 1) for the shared driver;
* :mod:`.starts`, :mod:`.selection`: EM starts and the held-out choice of the emission;
* :mod:`.estimators`: ``hmm-em``, ``hmm-mm``, ``hmm-mv``.
"""

from fusion_core.methods.sequential.emission import ResponseContext, context_subset, response_context
from fusion_core.methods.sequential.estimators import HMMEM, HMMMajority, HMMMomentMatching, SequentialBase
from fusion_core.methods.sequential.inference import (
    ForwardBackward,
    Packing,
    SequenceLayout,
    forward_backward,
    layout_from_responses,
    make_packing,
    viterbi,
)
from fusion_core.methods.sequential.model import BaumWelch, HMMState, HMMStats, baum_welch, hmm_e_step, hmm_viterbi
from fusion_core.methods.sequential.transitions import estimate_transition_mm, lagged_moments

__all__ = [
    "HMMEM",
    "BaumWelch",
    "ForwardBackward",
    "HMMMajority",
    "HMMMomentMatching",
    "HMMState",
    "HMMStats",
    "Packing",
    "ResponseContext",
    "SequenceLayout",
    "SequentialBase",
    "baum_welch",
    "context_subset",
    "estimate_transition_mm",
    "forward_backward",
    "hmm_e_step",
    "hmm_viterbi",
    "lagged_moments",
    "layout_from_responses",
    "make_packing",
    "response_context",
    "viterbi",
]
