"""Simulators with known ground truth (one module per model family)."""

from fusion_core.simulate.dawid_skene import Simulation, confusion_from_accuracy, dawid_skene

__all__ = ["Simulation", "confusion_from_accuracy", "dawid_skene"]
