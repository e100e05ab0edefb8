"""The HTML audit report: one self-contained file (plotly.js inlined once, no network script), a div per chart,
user text escaped; ``fusion-core report`` writes the same file and refuses bad input with one line and status 2."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from fusion_core.cli import main
from fusion_core.data.dataset import make_dataset
from fusion_core.data.responses import Responses
from fusion_core.diagnostics.audit import run_audit
from fusion_core.diagnostics.cartels.words import QUESTION
from fusion_core.plots.audit import audit_figures
from fusion_core.report import report_html, write_report
from fusion_core.simulate.demo import crowd_demo

EVIL_WORKER = '<img src=x onerror="alert(1)">'
EVIL_TASK = "</script><script>alert(2)</script>"


@pytest.fixture(scope="module")
def evil_demo() -> pd.DataFrame:
    d = crowd_demo(0)
    df = d.responses.copy()
    df["worker"] = df["worker"].replace({"w7": EVIL_WORKER})
    df["task"] = df["task"].replace({"t3": EVIL_TASK})
    return df


@pytest.fixture(scope="module")
def audit(evil_demo):
    resp = Responses.from_frame(evil_demo)
    ds = make_dataset(resp, name="demo <b>bold</b>", source="upload")
    return run_audit(ds, n_bootstrap=50, cartel_bootstrap=50)


@pytest.fixture(scope="module")
def page(audit) -> str:
    return report_html(audit)


def test_report_is_self_contained(page):
    from plotly.offline import get_plotlyjs

    bundle = get_plotlyjs()
    assert page.count(bundle) == 1  # plotly.js inlined once, plotly's own offline bundle
    rest = page.replace(bundle, "")
    assert not re.findall(r"<script[^>]*\bsrc\s*=", rest, flags=re.I)  # no external script at all
    assert not re.search(r"""(src|href)\s*=\s*['"]?(https?:)?//""", rest, flags=re.I)  # nothing fetched
    assert "cdn.plot.ly" not in rest
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")


def test_report_has_every_chart_and_table(audit, page):
    for key in audit_figures(audit):
        assert f'id="chart-{key}"' in page
    assert 'id="chart-plan"' in page and "Which labels to buy next" in page  # the re-labelling plan's section
    assert page.count("Plotly.newPlot") == len(audit_figures(audit)) + 1
    for heading in ("Summary", "Data and method", "Annotators (24, worst first)", "Cartel check", "Glossary"):
        assert heading in page
    assert "Whom can I trust?" in page and QUESTION in page


def test_user_text_is_escaped(page):
    assert EVIL_WORKER not in page and "alert(1)" in page  # present, but only escaped
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page or "&lt;img src=x onerror=" in page
    assert EVIL_TASK not in page
    assert "<b>bold</b>" not in page and "demo &lt;b&gt;bold&lt;/b&gt;" in page
    # inside the charts' JSON the ids are HTML-escaped text, never markup
    assert "<img" not in page


def test_write_report_and_unwritable_path(audit, tmp_path):
    out = write_report(audit, tmp_path / "audit.html")
    assert out.stat().st_size > 1_000_000  # plotly.js is inside
    from fusion_core.errors import UserInputError

    with pytest.raises(UserInputError, match="cannot write the report"):
        write_report(audit, tmp_path / "missing" / "audit.html")


def test_cli_report_writes_the_same_report(evil_demo, tmp_path, capsys):
    answers = tmp_path / "answers.csv"
    evil_demo.to_csv(answers, index=False)
    out = tmp_path / "report.html"
    assert main(["report", str(answers), "--out", str(out), "--bootstrap", "50", "--cartel-bootstrap", "50"]) == 0
    page = out.read_text(encoding="utf-8")
    for key in ("verdicts", "skill", "labels", "review", "agreement", "changes", "cartel"):
        assert f'id="chart-{key}"' in page
    assert EVIL_WORKER not in page and "<img" not in page
    line = capsys.readouterr().out
    assert "24 annotators" in line and "report ->" in line


@pytest.mark.parametrize(
    "args, message",
    [
        (["missing.csv"], "file not found"),
        (["answers.csv", "--label-col", "nope"], "nope"),
        (["answers.csv", "--bootstrap", "-1"], "--bootstrap"),
    ],
)
def test_cli_report_bad_input_one_line_status_2(args, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    pd.DataFrame({"task": ["a", "b"], "worker": ["x", "y"], "label": ["p", "q"]}).to_csv("answers.csv", index=False)
    assert main(["report", *args, "--out", "r.html"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err and message in err


def test_audit_figures_have_labelled_axes_and_the_chance_line(audit):
    figs = audit_figures(audit)
    assert set(figs) == {"verdicts", "skill", "labels", "review", "agreement", "changes", "cartel"}
    for key, fig in figs.items():
        assert fig.layout.xaxis.title.text and fig.layout.yaxis.title.text, key
    skill = figs["skill"]
    lines = [s for s in skill.layout.shapes if s.type == "line"]
    assert sorted(s.y0 for s in lines) == [0, audit.annotators.rule.chance_band]  # chance and the near-chance band
    n_points = sum(len(t.x) for t in skill.data)
    assert n_points == audit.n_workers  # every annotator, not a top-N
    assert all(t.error_y.array is not None for t in skill.data)  # interval bars
    shown = {str(x) for t in skill.data for x in t.customdata[:, 0]}
    assert any(s.startswith("&lt;img") for s in shown) and EVIL_WORKER not in shown  # ids escaped


def test_cli_report_on_ordinal_ratings_carries_the_rater_verdicts(tmp_path, capsys):
    from fusion_core.simulate.ratings import ordinal_crowd

    sim = ordinal_crowd(
        n_items=150, n_workers=8, n_lenient=2, n_harsh=2, n_noisy=0, labels=["lo", "mid", "hi"], n_levels=3, seed=2
    )
    answers = tmp_path / "ratings.csv"
    sim.responses.to_csv(answers, index=False)
    out = tmp_path / "r.html"
    args = ["report", str(answers), "--out", str(out), "--label-type", "ordinal", "--levels", "lo,mid,hi"]
    assert main([*args, "--bootstrap", "20", "--cartel-bootstrap", "20", "--rating-bootstrap", "20"]) == 0
    page = out.read_text(encoding="utf-8")
    assert "Raters (8): lenient, harsh, noisy" in page
    roles = sim.role
    section = page.split("Raters (8)")[1].split("<h2>")[0]
    for worker in roles.index[roles.isin(["lenient", "harsh"])]:  # every biased rater is listed with a verdict
        rows = [r for r in section.split("<tr>") if f"<td>{worker}</td>" in r]
        assert len(rows) == 1 and roles[worker] in rows[0]
    assert main(["report", str(answers), "--out", str(out), "--levels", "lo,mid,hi"]) == 2
    assert "--label-type ordinal" in capsys.readouterr().err
