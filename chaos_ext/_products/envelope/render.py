"""Envelopes in reports and comparisons: template contexts, files copied beside the report."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from chaos_ext._products.envelope.chart import envelope_svg
from chaos_ext._products.envelope.search import COUNTED, fmt
from chaos_ext._products.envelope.view import EnvelopeView, Movement
from chaos_ext._products.report.model import JournalError, load_journal
from chaos_ext._runner.redact import Redactor

__all__ = [
    "copy_envelopes",
    "envelope_context",
    "envelope_folder",
    "movement_context",
]


def _measured(run: Mapping[str, Any]) -> str:
    found = [
        f"{c['probe']} {c['value']:.4g}"
        for c in run.get("hypothesis") or []
        if c.get("phase") in ("during", "after") and isinstance(c.get("value"), int | float)
    ]
    return ", ".join(found) or "-"


def envelope_folder(index: int, view: EnvelopeView) -> str:
    """Where a report keeps the envelope's files: ``envelopes/NN-label``."""
    return f"envelopes/{index + 1:02d}-{_slug(view.label)}"


def _run_rows(view: EnvelopeView, folder: str) -> list[dict[str, Any]]:
    rows = []
    for run in view.runs:
        outcome = str(run["outcome"])
        rows.append(
            {
                "run": run["run"],
                "value": run.get("value", fmt(float(run["magnitude"]))),
                "phase": run["phase"],
                "why": run.get("why", ""),
                "outcome": outcome,
                "counted": outcome in COUNTED,
                "measured": _measured(run),
                "reason": run.get("reason", ""),
                "journal": f"{folder}/{run['journal']}" if run.get("journal") else "",
                "duration": f"{run['duration_s']:.0f} s" if "duration_s" in run else "?",
            }
        )
    return rows


def envelope_context(views: Sequence[EnvelopeView], charts: bool) -> list[dict[str, Any]]:
    """One dict per envelope for the report templates."""
    found = []
    for index, view in enumerate(views):
        space = view.search.space
        resolution = f"{space.resolution:.0%}" if space.relative else fmt(space.resolution)
        found.append(
            {
                "view": view,
                "anchor": f"envelope-{index + 1}",
                "kind": view.envelope.kind,
                "summary": view.summary,
                "agreement": view.agreement,
                "noisy": [t.text() for t in view.envelope.noisy],
                "non_monotone": list(view.envelope.non_monotone),
                "settings": (
                    f"{view.key} from {fmt(space.mild)} (mild) to {fmt(space.harsh)} (harsh end, "
                    f"the blast radius), resolution {resolution}, {view.search.repeats} repeat(s) "
                    f"a side, at most {view.search.max_runs} runs"
                ),
                "folder": envelope_folder(index, view),
                "rows": _run_rows(view, envelope_folder(index, view)),
                "svg": envelope_svg([view], salt=f"e{index}") if charts else "",
            }
        )
    return found


def movement_context(movements: Sequence[Movement]) -> list[dict[str, Any]]:
    """One dict per compared pair, with the two envelopes overlaid."""
    return [
        {
            "m": m,
            "anchor": f"envelope-{i + 1}",
            "css": m.verdict.replace(" ", "-"),
            "svg": envelope_svg([m.baseline, m.tuned], salt=f"m{i}"),
        }
        for i, m in enumerate(movements)
    ]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:60] or "envelope"


def copy_envelopes(views: Sequence[EnvelopeView], out: Path, secrets: Sequence[str]) -> list[Path]:
    """``out/envelopes/NN-label/envelope.json`` and its runs' journals, redacted."""
    written = []
    redactor = Redactor(list(secrets))
    for index, view in enumerate(views):
        folder = out / envelope_folder(index, view)
        (folder / "runs").mkdir(parents=True, exist_ok=True)
        source = Path(view.source)
        data = redactor.value(json.loads(source.read_text()))
        (folder / "envelope.json").write_text(json.dumps(data, indent=2))
        for run in view.runs:
            name = str(run.get("journal") or "")
            path = source.parent / name
            if not name.startswith("runs/") or not path.is_file():
                continue
            try:
                journal = load_journal(path, tuple(secrets))
            except JournalError:
                continue
            (folder / name).write_text(json.dumps(journal, indent=2, default=str))
        written.append(folder)
    return written
