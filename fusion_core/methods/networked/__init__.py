"""Networked family: MRF label models on an item graph (Traganitis & Giannakis §5; spec §2.4).

* :mod:`.icm`: Potts energy, colour-class Gauss–Seidel / Jacobi ICM, edge agreement;
* :mod:`.model`: pseudo-likelihood EM steps (Alg. 3) for the shared EM driver;
* :mod:`.estimators`: ``mrf-em`` (Alg. 4) and ``mrf-mv`` (MV + Alg. 3).
"""

from fusion_core.methods.networked.estimators import MRF_PARAMS, MRFEM, MRFMajority, NetworkedBase
from fusion_core.methods.networked.icm import color_classes, edge_agreement, icm, icm_energy, node_delta, potts_energy
from fusion_core.methods.networked.model import MRFState, MRFStats, PottsEM, network_em

__all__ = [
    "MRFEM",
    "MRF_PARAMS",
    "MRFMajority",
    "MRFState",
    "MRFStats",
    "NetworkedBase",
    "PottsEM",
    "color_classes",
    "edge_agreement",
    "icm",
    "icm_energy",
    "network_em",
    "node_delta",
    "potts_energy",
]
