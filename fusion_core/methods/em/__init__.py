"""The EM driver shared by every EM method (:mod:`.driver`) and its optional annealing phase (:mod:`.annealing`)."""

from fusion_core.methods.em.annealing import AnnealSchedule, check_anneal, resolve_schedule
from fusion_core.methods.em.driver import (
    EMModel,
    EMRun,
    EMSettings,
    EStep,
    RuleStop,
    StopRule,
    align_run,
    best_run,
    class_alignment,
    converged,
    run_em,
    run_em_lockstep,
)

__all__ = [
    "AnnealSchedule",
    "EMModel",
    "EMRun",
    "EMSettings",
    "EStep",
    "RuleStop",
    "StopRule",
    "align_run",
    "best_run",
    "check_anneal",
    "class_alignment",
    "converged",
    "resolve_schedule",
    "run_em",
    "run_em_lockstep",
]
