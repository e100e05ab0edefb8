"""The method registry: the CLI and the app list methods from here, never from a hard-coded list.

A method family is one module in :mod:`fusion_core.methods` whose estimator classes carry the
:func:`register` decorator (that decorator call *is* the registry entry).  :func:`available` imports
every module of the package once, so a new file shows up in ``fusion-core methods`` and the app
without touching anything else.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable

from fusion_core.errors import UserInputError

INPUT_KINDS = ("plain", "sequence", "graph", "context", "multilabel")
_REGISTRY: dict[str, "MethodInfo"] = {}
_LOADED = False


@dataclass(frozen=True)
class ParamSpec:
    """One constructor parameter as the CLI/app should offer it."""

    name: str
    default: Any
    kind: str  # "int" | "float" | "bool" | "str" | "choice" | "object"
    help: str = ""
    choices: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    advanced: bool = False  # hide behind an "advanced" toggle in the app

    def parse(self, text: str) -> Any:
        """Convert a command-line string to this parameter's type (with a clear error)."""
        try:
            if self.kind == "int":
                value: Any = int(text)
            elif self.kind == "float":
                value = float(text)
            elif self.kind == "bool":
                low = text.strip().lower()
                if low not in ("1", "0", "true", "false", "yes", "no", "on", "off"):
                    raise ValueError(text)
                value = low in ("1", "true", "yes", "on")
            elif self.kind in ("none", "object") and text.strip().lower() == "none":
                value = None
            else:
                value = text
        except ValueError:
            raise UserInputError(f"parameter {self.name} expects {self.kind}, got {text!r}.") from None
        if self.choices is not None and value not in self.choices:
            raise UserInputError(f"parameter {self.name} must be one of {list(self.choices)}, got {value!r}.")
        return value


@dataclass(frozen=True)
class MethodInfo:
    name: str
    cls: type
    summary: str
    inputs: tuple[str, ...]
    family: str
    probabilistic: bool
    params: tuple[ParamSpec, ...] = field(default_factory=tuple)
    reference: str = ""

    def needs(self) -> tuple[str, ...]:
        """Extra inputs beyond plain responses."""
        return tuple(i for i in self.inputs if i != "plain")


def _kind_of(default: Any) -> str:
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, int):
        return "int"
    if isinstance(default, float):
        return "float"
    if isinstance(default, str):
        return "str"
    return "object"


def register(
    name: str,
    *,
    summary: str,
    inputs: tuple[str, ...] = ("plain",),
    family: str = "",
    probabilistic: bool = True,
    params: dict[str, dict[str, Any]] | None = None,
    reference: str = "",
) -> Callable[[type], type]:
    """Class decorator: register an :class:`~fusion_core.methods.base.Aggregator` subclass under ``name``.

    ``params`` adds help text / choices / ranges for constructor parameters; defaults and types come
    from the ``__init__`` signature so they cannot drift apart.
    """
    bad = set(inputs) - set(INPUT_KINDS)
    if bad:
        raise ValueError(f"unknown input kinds {bad}")
    extra = params or {}

    def deco(cls: type) -> type:
        sig = inspect.signature(cls.__init__)
        specs = []
        for p in sig.parameters.values():
            if p.name == "self" or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                continue
            meta = dict(extra.get(p.name, {}))
            kind = meta.pop("kind", None) or ("choice" if meta.get("choices") else _kind_of(p.default))
            if "choices" in meta and meta["choices"] is not None:
                meta["choices"] = tuple(meta["choices"])
            specs.append(ParamSpec(name=p.name, default=p.default, kind=kind, **meta))
        unknown = set(extra) - {s.name for s in specs}
        if unknown:
            raise ValueError(f"{cls.__name__}: params metadata for unknown parameters {unknown}")
        if name in _REGISTRY and _REGISTRY[name].cls is not cls:
            raise ValueError(f"method name {name!r} registered twice")
        cls.method_name = name
        cls.inputs = tuple(inputs)
        _REGISTRY[name] = MethodInfo(
            name=name,
            cls=cls,
            summary=summary,
            inputs=tuple(inputs),
            family=family or cls.__module__.rsplit(".", 1)[-1],
            probabilistic=probabilistic,
            params=tuple(specs),
            reference=reference,
        )
        return cls

    return deco


def _load_all() -> None:
    global _LOADED
    if _LOADED:
        return
    import fusion_core.methods as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        if not mod.name.startswith("_") and mod.name not in ("base", "registry"):
            importlib.import_module(f"{pkg.__name__}.{mod.name}")
    _LOADED = True


def available(inputs: tuple[str, ...] | None = None) -> list[MethodInfo]:
    """All registered methods (optionally only those runnable with the given input kinds), by name."""
    _load_all()
    infos = sorted(_REGISTRY.values(), key=lambda m: m.name)
    if inputs is not None:
        have = set(inputs) | {"plain"}
        infos = [m for m in infos if set(m.inputs) <= have]
    return infos


def info(name: str) -> MethodInfo:
    _load_all()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UserInputError(f"unknown method {name!r}; available: {', '.join(sorted(_REGISTRY))}.") from None


def create(name: str, **params: Any):
    """An unfitted estimator for the registered method ``name``."""
    cls = info(name).cls
    valid = {p.name for p in info(name).params}
    unknown = set(params) - valid
    if unknown:
        raise UserInputError(f"method {name!r} has no parameter(s) {sorted(unknown)}; it has {sorted(valid)}.")
    return cls(**params)
