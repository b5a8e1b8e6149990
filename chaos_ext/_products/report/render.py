"""The game-day report: one self-contained HTML file and a Markdown summary.

HTML: inline CSS and inline SVG charts, no script and no external resource,
so it opens offline and can be attached to a ticket. Both are rendered from
jinja2 templates shipped in ``chaos_ext/_products/report/templates``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from chaos_ext import __version__
from chaos_ext._core.percentile import METHOD
from chaos_ext._products.advise.html import render_risks_html
from chaos_ext._products.advise.risks import Advice
from chaos_ext._products.envelope.render import copy_envelopes, envelope_context
from chaos_ext._products.envelope.view import EnvelopeView
from chaos_ext._products.report.charts import chart_svg
from chaos_ext._products.report.findings import findings_summary
from chaos_ext._products.report.model import RunView, retry_commands, unsteady_text
from chaos_ext._products.report.notes import clock
from chaos_ext._products.report.recovery_window import recovery_window
from chaos_ext._products.report.score import Score, resilience_score
from chaos_ext._products.report.series import since
from chaos_ext._products.report.tables import (
    Cell,
    activity_rows,
    ledger_rows,
    probe_table,
)
from chaos_ext._products.report.words import verdict_text

__all__ = [
    "MAX_CHARTS",
    "ReportFiles",
    "environment",
    "paragraphs",
    "render_html",
    "render_markdown",
    "write_report",
]

MAX_CHARTS = 12  # per experiment; the rest stay in the tables and the journal


@dataclass(frozen=True)
class ReportFiles:
    html: Path
    markdown: Path
    journals: tuple[Path, ...]
    score: Score


def _md(text: Any) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _mdcell(cell: Cell) -> str:
    mark = "" if cell.ok is None else (" ✓" if cell.ok else " ✗ **out of tolerance**")
    return _md(cell.text) + mark


def environment() -> jinja2.Environment:
    """The templates' environment (autoescape for *.html.j2)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("chaos_ext._products.report", "templates"),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",)),
        trim_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["md"] = _md
    env.filters["mdcell"] = _mdcell
    env.filters["clock"] = clock
    return env


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "?"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))


def _duration(view: RunView) -> str:
    return f"{view.duration:.1f} s" if view.duration is not None else "?"


def _charts(view: RunView, index: int) -> tuple[list[str], int, int]:
    """The run's charts (at most MAX_CHARTS), how many series were left out, and how many
    samples from before the run started were cut (a range query reaching back shows the
    experiment before this one: not this run's)."""
    timeline = view.timeline
    origin = timeline.start
    shown = [since(s, origin) for s in view.series[:MAX_CHARTS]]
    recovery = recovery_window(view.recovery)
    svgs = [
        chart_svg(
            s,
            view.windows,
            origin,
            view.tolerances.get(s.name),
            salt=f"x{index}-{i}",
            abort_at=view.abort_at,
            recovery=recovery,
            unit=view.units.get(s.name, ""),
            until=timeline.end,
        )
        for i, (s, _) in enumerate(shown)
        if s.points
    ]
    return svgs, len(view.series) - len(svgs), sum(cut for _, cut in shown)


def _experiment(view: RunView, index: int, charts: bool) -> dict[str, Any]:
    unsteady = unsteady_text(view)
    svgs, omitted, cut = _charts(view, index) if charts and not unsteady else ([], 0, 0)
    table = probe_table(view)
    return {
        "view": view,
        "unsteady": unsteady,
        "retry": retry_commands(view),
        "anchor": f"experiment-{index + 1}",
        "verdict": verdict_text(view, table),
        "verdict_md": verdict_text(view, table, markdown=True),
        "started": _when(view.start),
        "duration": _duration(view),
        "probes": table,
        "cut": cut,
        "method": activity_rows(view.method, view.start),
        "rollbacks": activity_rows(view.rollbacks, view.start),
        "ledger": ledger_rows(view),
        "charts": svgs,
        "omitted": omitted,
    }


def _context(
    views: Sequence[RunView],
    title: str,
    charts: bool,
    envelopes: Sequence[EnvelopeView] = (),
    advice: Advice | None = None,
) -> dict[str, Any]:
    experiments = [_experiment(v, i, charts) for i, v in enumerate(views)]
    findings = [f for v in views for f in v.findings]
    return {
        "advice": advice,
        "risks_html": Markup(render_risks_html(advice.risks)) if advice is not None else None,  # noqa: S704 - escaped by render_risks_html
        "findings": findings,
        "findings_summary": findings_summary(findings),
        "title": title,
        "envelopes": envelope_context(envelopes, charts),
        "generated": _when(time.time()),
        "version": __version__,
        "percentile_method": METHOD,
        "score": resilience_score(views),
        "experiments": experiments,
        "rollback_failed": [x for x in experiments if x["view"].rollback_problems],
        "unprotected": [x for x in experiments if x["view"].unprotected],
        "retried": [
            x for x in experiments if x["view"].retried and not x["view"].rollback_problems
        ],
    }


def render_html(
    views: Sequence[RunView],
    title: str,
    envelopes: Sequence[EnvelopeView] = (),
    advice: Advice | None = None,
) -> str:
    """The self-contained HTML report (envelopes first, drawn; ``advice``: the risks
    ``gameday advise`` read from a cluster, as a section)."""
    template = environment().get_template("report.html.j2")
    return template.render(_context(views, title, True, envelopes, advice))


def render_markdown(
    views: Sequence[RunView],
    title: str,
    envelopes: Sequence[EnvelopeView] = (),
    advice: Advice | None = None,
) -> str:
    """The Markdown summary (no charts)."""
    template = environment().get_template("summary.md.j2")
    return paragraphs(template.render(_context(views, title, False, envelopes, advice)))


def paragraphs(text: str) -> str:
    """Blank lines around headings and tables, never two in a row."""
    lines: list[str] = []
    for line in text.splitlines():
        previous = lines[-1] if lines else ""
        table_edge = previous.startswith("|") != line.startswith("|")
        if previous and line and (line.startswith("#") or table_edge):
            lines.append("")
        lines.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines).strip() + "\n")


def _journal_name(view: RunView, index: int) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(view.source).stem or view.title)[:60]
    return f"{index + 1:02d}-{stem or 'journal'}.json"


def write_report(
    views: Sequence[RunView],
    journals: Sequence[dict[str, Any]],
    out: Path,
    title: str,
    envelopes: Sequence[EnvelopeView] = (),
    secrets: Sequence[str] = (),
    advice: Advice | None = None,
) -> ReportFiles:
    """Write ``report.html``, ``summary.md`` and the redacted journals under ``out``
    (an envelope's files under ``out/envelopes/``; ``advice``: a risks section)."""
    out.mkdir(parents=True, exist_ok=True)
    html = out / "report.html"
    html.write_text(render_html(views, title, envelopes, advice))
    markdown = out / "summary.md"
    markdown.write_text(render_markdown(views, title, envelopes, advice))
    copy_envelopes(envelopes, out, secrets)
    folder = out / "journals"
    folder.mkdir(exist_ok=True)
    written = []
    for index, (view, journal) in enumerate(zip(views, journals, strict=True)):
        path = folder / _journal_name(view, index)
        path.write_text(json.dumps(journal, indent=2, default=str))
        written.append(path)
    return ReportFiles(html, markdown, tuple(written), resilience_score(views))
