"""Every public estimator documents one runnable example, and every example in the library runs (doctest)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import fusion_core
from fusion_core.methods import available


def _modules() -> list[str]:
    names = (m.name for m in pkgutil.walk_packages(fusion_core.__path__, prefix="fusion_core."))
    return sorted(n for n in names if not n.endswith(".__main__"))  # running one would start the CLI


@pytest.mark.parametrize("name", [m.name for m in available()])
def test_every_registered_estimator_has_an_example(name):
    cls = next(m.cls for m in available() if m.name == name)
    doc = cls.__doc__ or ""
    assert "\nExamples\n--------\n" in doc and ">>> " in doc, f"{cls.__name__} has no runnable Examples section"
    assert "\nParameters\n----------\n" in doc or not cls.params


@pytest.mark.parametrize("module", _modules())
def test_examples_run(module):
    mod = importlib.import_module(module)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(mod, module):
        if test.examples:
            runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} failing doctest example(s) in {module}"
