"""The words for annotators who agree with each other beyond their skills — one place for every front end (the
Audit and Cartels pages, the HTML report, ``summary.json``, the CLI, the glossary).

The collusion check (:mod:`.collusion`) measures *dependence*: members agree more than their estimated accuracies
explain, on answers the rest of the crowd rejects.  That is what collusion looks like, but also what copies of one
source look like (several runs of one model, a shared answer sheet, one person under several ids).  The words do
not accuse without evidence of intent:

* every group that passes the check is a :data:`DEPENDENT` group, and its members get that verdict;
* a group whose members give near-identical answers (member pairs agree on at least :data:`NEAR_IDENTICAL` of their
  shared decided items) is :data:`NEAR_DUPLICATE` — one source seen several times, not a conspiracy;
* :data:`POSSIBLE_COLLUSION` is reserved for the others: members whose answers otherwise differ as independent
  annotators' do, yet who share answers the rest of the crowd rejects.  Even then the words say "possible": a
  minority who are right where the rest is systematically wrong shares rejected answers too (simulated: 4 good
  annotators against 16 who fall for the same traps on 45 % of binary items are found as such a group), and no
  test without gold tells the two apart.
"""

from __future__ import annotations

DEPENDENT = "dependent group (copies or collusion)"
"""The verdict of a member of a group that passes the collusion check."""
NEAR_DUPLICATE = "near-duplicate annotators (one source?)"
"""A dependent group whose members' answers are near-identical."""
POSSIBLE_COLLUSION = "possible collusion"
"""A dependent group whose members otherwise answer like independent annotators."""
NOT_DEPENDENT = "no evidence of dependence"
"""A proposed group that fails the check."""
NEAR_IDENTICAL = 0.95
"""Share of member pairs agreeing (on the items the rest of the crowd decides) from which a dependent group's answers
are near-identical.  Independent annotators of accuracy a agree on about a² + (1 − a)² of binary items (0.905 at
a = 0.95); the planted cartels of ``benchmarks/collusion_calibration.py`` (members 80–95 % faithful to a shared
target) agree on 0.70–0.90."""
QUESTION = "Do some annotators copy each other or collude?"
"""The audit's question about dependent groups (findings, report, app)."""
BAD_QUESTION = "Who is spamming, sabotaging or copying?"
"""The audit's question about flagged annotators."""


def group_kind(dependent: bool, agreement: float) -> str:
    """The word for a proposed group: :data:`NOT_DEPENDENT` when it failed the check, else :data:`NEAR_DUPLICATE`
    when its member pairs agree on at least :data:`NEAR_IDENTICAL` of their shared items, else
    :data:`POSSIBLE_COLLUSION`."""
    if not dependent:
        return NOT_DEPENDENT
    return NEAR_DUPLICATE if agreement >= NEAR_IDENTICAL else POSSIBLE_COLLUSION


def n_groups(n: int) -> str:
    """E.g. "2 dependent groups (copies or collusion)"."""
    return f"{n} dependent group{'s' if n != 1 else ''} (copies or collusion)"


def groups_headline(kinds: list[str] | tuple[str, ...]) -> str:
    """One sentence naming the dependent groups found and their kinds, e.g. "2 dependent groups (copies or
    collusion): group 1 near-duplicate annotators (one source?), group 2 possible collusion"."""
    if not kinds:
        return f"No {DEPENDENT} found"
    return n_groups(len(kinds)) + ": " + ", ".join(f"group {i + 1} {k}" for i, k in enumerate(kinds))


__all__ = [
    "BAD_QUESTION",
    "DEPENDENT",
    "NEAR_DUPLICATE",
    "NEAR_IDENTICAL",
    "NOT_DEPENDENT",
    "POSSIBLE_COLLUSION",
    "QUESTION",
    "group_kind",
    "groups_headline",
    "n_groups",
]
