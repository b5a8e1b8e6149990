"""The report's section of ``gameday advise``'s risks (HTML, escaped, no script)."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from chaos_ext._products.advise.risks import Risk

__all__ = ["render_risks_html"]


def _row(risk: Risk) -> str:
    objects = "".join(f"<li>{escape(o)}</li>" for o in risk.objects)
    tested = risk.tested_by
    if tested.experiment is None:
        run = "no experiment yet"
    else:
        run = f"<code>{escape(tested.command())}</code>"
    return (
        f'<tr class="risk risk-{escape(risk.kind)}">'
        f"<td>{escape(risk.title)}</td>"
        f"<td><ul>{objects}</ul></td>"
        f"<td>{escape(risk.evidence)}</td>"
        f"<td>{run}</td></tr>"
    )


def render_risks_html(risks: Sequence[Risk]) -> str:
    """A ``<section>`` listing each risk, its objects, evidence and the experiment that tests it."""
    if not risks:
        body = "<p>No risk found: none of the incidents' risks shows in what was read.</p>"
    else:
        rows = "".join(_row(r) for r in risks)
        body = (
            '<table class="advise"><thead><tr><th>risk</th><th>objects</th><th>evidence</th>'
            f"<th>experiment</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    return f'<section id="advise"><h2>Risks before any fault (gameday advise)</h2>{body}</section>'
