"""The audit's options, declared once, as estimators declare their parameters (:mod:`fusion_core.methods.params`):
type, default, range or choices, and help.

That one declaration drives :func:`~fusion_core.diagnostics.audit.run_audit`'s keyword-only signature and the
*Parameters* section of its docstring (:func:`declared_options`), the central check of every value before any work
(:func:`audit_options`: one :class:`~fusion_core.errors.UserInputError` naming the option and what it accepts), and
the front ends: ``fusion-core report`` takes its defaults, choices and help from here (:func:`option_help`), and the
app's audit page its label types.  A new audit option is one entry here, then read in ``run_audit``.  The module
is light (it loads no part of the audit), so the CLI can build its options from it at start-up; the cartel test's
defaults equal :data:`fusion_core.diagnostics.cartels.collusion.DEFAULTS` (a test checks it).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from fusion_core.errors import UserInputError
from fusion_core.methods.params import Bool, Choice, Float, Int, Object, Param, Seed, Text, named, show
from fusion_core.methods.results import FitResult

AUDIT_LABEL_TYPES = {
    "nominal": "Categories (no order)",
    "ordinal": "Ordered levels (e.g. 1–5 scores)",
    "numeric": "Numbers (continuous ratings)",
}
"""The label types the audit accepts, with their names for the app."""


def _instance(kind: type, what: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if not isinstance(value, kind):
            raise ValueError(what)
        return value

    return check


def _rule(value: Any) -> Any:
    from fusion_core.diagnostics.audit.rules import VerdictRule  # the audit package loads only when it runs

    return _instance(VerdictRule, "a VerdictRule, or None for the default rule")(value)


def _review(value: Any) -> Any:
    from fusion_core.diagnostics.audit.items import ReviewRule

    return _instance(ReviewRule, "a ReviewRule, or None for the default rule")(value)


def _mapping(value: Any) -> Any:
    if not isinstance(value, Mapping):
        raise ValueError("a mapping of the method's parameter names to values")
    return value


def _frame(value: Any) -> Any:
    import pandas as pd

    return _instance(pd.DataFrame, "a DataFrame of gold pairwise judgements")(value)


def _callable(value: Any) -> Any:
    if not callable(value):
        raise ValueError("a function that receives AuditProgress events")
    return value


AUDIT_OPTIONS: dict[str, Param] = named(
    {
        "method": Text(
            "auto", help="The method to fit (a registered name; 'auto' chooses one by held-out fit, docs/AUTO.md)."
        ),
        "params": Object(
            None, help="Parameters of the method.", text="a mapping of parameter names to values", check=_mapping
        ),
        "fit": Object(
            None,
            help="A fit of these data to reuse instead of fitting again.",
            text="a FitResult of these data",
            check=_instance(FitResult, "a FitResult of these data"),
        ),
        "rule": Object(
            None,
            help="The thresholds of the annotator verdicts (None: audit.rules.DEFAULT_RULE).",
            text="a VerdictRule, or None for the default rule",
            check=_rule,
        ),
        "review": Object(
            None,
            help="Which items to look at again (None: audit.items.DEFAULT_REVIEW).",
            text="a ReviewRule, or None for the default rule",
            check=_review,
        ),
        "n_bootstrap": Int(300, low=0, help="Bootstrap replicates of the agreement intervals (0: no interval)."),
        "cartel_bootstrap": Int(200, low=1, help="Bootstrap replicates of the cartel test."),
        "cartel_alpha": Float(
            0.05,
            low=0.0,
            high=1.0,
            low_open=True,
            high_open=True,
            help="Significance level of the cartel test.",
        ),
        "cartel_max_annotators": Int(
            100,
            low=2,
            help="The cartel test analyses this many most active annotators (its cost grows fast with them).",
            advanced=True,
        ),
        "random_state": Seed(0),
        "progress": Object(
            None,
            help="Receives progress events (share done, time left).",
            text="a function that receives AuditProgress events",
            check=_callable,
        ),
        "label_type": Choice(
            "nominal",
            tuple(AUDIT_LABEL_TYPES),
            help="Categories (default); ordered levels or numeric ratings add the rating verdicts (lenient, harsh, "
            "noisy).",
        ),
        "levels": Object(
            None,
            help="Ordinal labels: their order, lowest first, or 'numeric' (the default when every label is a number).",
            text="a list of the levels, lowest first, or 'numeric'",
        ),
        "rating_bootstrap": Int(100, low=20, help="Bootstrap refits of the rating verdicts."),
        "pairwise_gold": Object(
            None,
            help="Pairwise data: human judgements of some comparisons (task, option_a, option_b, preference) that "
            "correct the judges' win rates.",
            text="a DataFrame of gold pairwise judgements",
            check=_frame,
        ),
        "concurrent": Bool(
            True,
            help="Run the agreement intervals in a background thread alongside the fit and the cartel check (same "
            "result).",
            advanced=True,
        ),
    }
)


def audit_options(given: Mapping[str, Any]) -> dict[str, Any]:
    """Every audit option, checked: the given values (each validated by its declaration) and the defaults for the
    rest; an unknown name is refused with the list of the options."""
    unknown = sorted(set(given) - set(AUDIT_OPTIONS))
    if unknown:
        raise TypeError(
            f"run_audit() got unknown option(s) {', '.join(unknown)}; the options are {', '.join(AUDIT_OPTIONS)}."
        )
    return {name: p.validate(given[name], "audit") if name in given else p.default for name, p in AUDIT_OPTIONS.items()}


def option_help(name: str) -> str:
    """The command-line help of an option: its help text and default ("… (default 300)")."""
    p = AUDIT_OPTIONS[name]
    return f"{p.help[:-1] if p.help.endswith('.') else p.help} (default {show(p.default)})"


F = TypeVar("F", bound=Callable[..., Any])


def declared_options(func: F) -> F:
    """Give ``func(data, **options)`` the keyword-only signature and the *Parameters* docstring section of
    :data:`AUDIT_OPTIONS` (as :class:`~fusion_core.methods.params.Declared` does for estimators)."""
    first = next(iter(inspect.signature(func).parameters.values()))
    keywords = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=p.default) for name, p in AUDIT_OPTIONS.items()
    ]
    func.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [first, *keywords], return_annotation=inspect.signature(func).return_annotation
    )
    doc = inspect.cleandoc(func.__doc__ or "")
    entries = "\n".join(p.doc() for p in AUDIT_OPTIONS.values())
    func.__doc__ = f"{doc}\n\nParameters\n----------\ndata : Dataset, Responses or DataFrame\n    The responses to audit.\n{entries}\n"
    return func


def cli_value(flag: str, name: str, value: Any) -> Any:
    """A command-line value of option ``name`` checked by its declaration, the message naming the ``flag``
    ("--bootstrap must be a whole number ≥ 0; got -1.")."""
    p = AUDIT_OPTIONS[name]
    try:
        return p.validate(value)
    except UserInputError:
        raise UserInputError(f"{flag} must be {p.allowed()}; got {show(value)}.") from None


def cli_type(name: str) -> Callable[[str], Any]:
    """The argparse ``type=`` of option ``name``: ``int``, ``float`` or ``str`` by its declared kind."""
    return {"int": int, "seed": int, "float": float}.get(AUDIT_OPTIONS[name].kind, str)
