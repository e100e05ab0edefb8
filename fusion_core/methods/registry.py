"""The method registry: the CLI and the app list methods from here, never from a hard-coded list.

A method is a class with the :func:`register` decorator (that decorator call *is* the registry entry) in any
module or family package of :mod:`fusion_core.methods`.  :func:`available` imports every module of the package
once, so a new file shows up in ``fusion-core methods`` and in the app without touching anything else.
Parameters come from the class's ``params`` declarations (:mod:`fusion_core.methods.params`).
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from fusion_core.errors import UserInputError
from fusion_core.methods.params import Param

INPUT_KINDS = ("plain", "sequence", "graph", "context", "multilabel")
_REGISTRY: dict[str, MethodInfo] = {}
T = TypeVar("T", bound=type)


@dataclass(frozen=True)
class MethodInfo:
    """A registered method: its name, class, one-line summary in plain words, the inputs it needs, its family,
    whether it gives calibrated probabilities, its declared parameters and the paper it comes from."""

    name: str
    cls: type
    summary: str
    inputs: tuple[str, ...]
    family: str
    probabilistic: bool
    params: tuple[Param, ...]
    reference: str = ""
    title: str = ""

    def needs(self) -> tuple[str, ...]:
        """Extra inputs beyond plain responses."""
        return tuple(i for i in self.inputs if i != "plain")

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise UserInputError(
            f"method '{self.name}' has no parameter '{name}'; it has {', '.join(p.name for p in self.params) or 'none'}."
        )

    @property
    def label(self) -> str:
        """Plain-words name for menus ("Dawid–Skene (full confusion matrices)"), falling back to the code name."""
        return self.title or self.name


def register(
    name: str,
    *,
    summary: str,
    title: str = "",
    inputs: tuple[str, ...] = ("plain",),
    family: str = "",
    probabilistic: bool = True,
    reference: str = "",
) -> Callable[[T], T]:
    """Class decorator: register an :class:`~fusion_core.methods.base.Aggregator` subclass under ``name``."""
    bad = set(inputs) - set(INPUT_KINDS)
    if bad:
        raise ValueError(f"unknown input kinds {bad}")

    def deco(cls: T) -> T:
        if name in _REGISTRY and _REGISTRY[name].cls is not cls:
            raise ValueError(f"method name {name!r} registered twice")
        cls.method_name = name  # type: ignore[attr-defined]
        cls.inputs = tuple(inputs)  # type: ignore[attr-defined]
        declared: dict[str, Param] = getattr(cls, "params", {})
        module = cls.__module__.split(".")
        fam = family or (module[3] if len(module) > 3 and module[2] == "methods" else module[-1])
        _REGISTRY[name] = MethodInfo(
            name=name,
            cls=cls,
            summary=summary,
            inputs=tuple(inputs),
            family=fam,
            probabilistic=probabilistic,
            params=tuple(declared.values()),
            reference=reference,
            title=title,
        )
        return cls

    return deco


@functools.cache
def _load_all() -> None:
    """Import every module of :mod:`fusion_core.methods` once, so their ``@register`` entries run (the package is
    found by its folder, this module's own, so the registry imports no method statically: no import cycle)."""
    for mod in pkgutil.walk_packages([str(Path(__file__).parent)], prefix=f"{__package__}."):
        if not mod.name.rsplit(".", 1)[-1].startswith("_"):
            importlib.import_module(mod.name)


def available(inputs: tuple[str, ...] | None = None) -> list[MethodInfo]:
    """All registered methods (optionally only those runnable with the given input kinds), by name."""
    _load_all()
    infos = sorted(_REGISTRY.values(), key=lambda m: m.name)
    if inputs is not None:
        have = set(inputs) | {"plain"}
        infos = [m for m in infos if set(m.inputs) <= have]
    return infos


def info(name: str) -> MethodInfo:
    """The entry of method ``name``.  Methods already imported (``ds``, ``ds1``, ``mv`` come with the package) are
    returned without importing every other family (0.5 s of CPU at start-up: networkx, scipy.special, …)."""
    got = _REGISTRY.get(name)
    if got is not None:
        return got
    _load_all()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UserInputError(f"unknown method '{name}'; available: {', '.join(sorted(_REGISTRY))}.") from None


def create(name: str, **params: Any) -> Any:
    """An unfitted estimator for the registered method ``name`` (parameters checked against its declarations)."""
    meta = info(name)
    valid = {p.name for p in meta.params}
    unknown = sorted(set(params) - valid)
    if unknown:
        raise UserInputError(
            f"method '{name}' has no parameter {', '.join(repr(u) for u in unknown)}; it has {', '.join(sorted(valid)) or 'none'}."
        )
    est = meta.cls(**params)
    est.validated_params()
    return est
