"""Simulators with known ground truth (one module per model family).  Each returns a :class:`Simulation` subclass
whose generator-specific facts (roles, cartel members, an item graph …) are typed fields."""

from fusion_core.simulate.dawid_skene import CrowdSimulation, Simulation, confusion_from_accuracy, dawid_skene

__all__ = ["CrowdSimulation", "Simulation", "confusion_from_accuracy", "dawid_skene"]
