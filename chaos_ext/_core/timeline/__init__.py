"""One timeline per run: what was on, and when (pure data; the runner builds it once).

Every word gameday prints about a run (console, report, summary, JUnit, compare)
is read from this one record, stored in the journal as ``gameday.timeline``;
no output rebuilds "when was what on" from chaoslib's events by itself.

* **phases** (:data:`PHASES`): settle, before, method, after, rollbacks, sweep,
  recovery, each with its start and end (epoch seconds);
* **activities**: each activity run with its phase, its pauses and whether a
  stop cut it short;
* **entries**: each ledger entry's on and off times, its kind and its *role*:
  a ``fault`` (it changes the system under test), a ``load`` (traffic that
  measures it: never fault time) or ``bookkeeping`` (gameday's own records,
  such as the fault-window publisher). A run whose method has actions but
  whose faults are not in the ledger (a plain Chaos Toolkit process or HTTP
  action) gets one entry of kind ``experiment-actions``, on at the first
  action's start and off at the end of the rollbacks: its faults are open
  until they are rolled back;
* **stops**: signals and stop conditions, when gameday saw them, when
  Prometheus says a condition fired, and what they did;
* **measurements**: every hypothesis value with the window it belongs to.

The windows are named for what they are (:data:`WINDOWS`): a measurement taken
while a fault was open is ``faults-on`` whatever chaoslib phase took it (Chaos
Toolkit's steady-state-after runs *before* the rollbacks, so it is measured with
the faults still on), ``during`` when it is a continuous check or a method probe
inside a fault, ``before`` before the first fault, ``after-undo`` once the last
fault was undone. A rule over what was true, not over which callback ran last.

The modules: :mod:`.model` (the data and the window rule), :mod:`.build`
(:func:`build_timeline` from a journal, :func:`timeline_of` to read one back),
:mod:`.measurements` (every measured value and its window), :mod:`.figures` (a
hypothesis probe's own figure), :mod:`.texts` (``${var}`` in the texts a run
shows), :mod:`.journal` (reading a journal defensively).
"""

from __future__ import annotations

from chaos_ext._core.timeline.build import ACTIONS_KIND, REBUILT_NOTE, build_timeline, timeline_of
from chaos_ext._core.timeline.figures import figure_of, figure_text
from chaos_ext._core.timeline.journal import epoch, error_line
from chaos_ext._core.timeline.model import (
    BOOKKEEPING_KINDS,
    LOAD_KINDS,
    PHASES,
    WINDOW_PHRASES,
    WINDOW_WORDS,
    WINDOWS,
    ActivitySpan,
    EntrySpan,
    Measurement,
    Span,
    Stop,
    Timeline,
    role_of,
    timeline_from_dict,
    window_at,
)
from chaos_ext._core.timeline.texts import journal_vars, substitute, text_vars

__all__ = [
    "ACTIONS_KIND",
    "BOOKKEEPING_KINDS",
    "LOAD_KINDS",
    "PHASES",
    "REBUILT_NOTE",
    "WINDOWS",
    "WINDOW_PHRASES",
    "WINDOW_WORDS",
    "ActivitySpan",
    "EntrySpan",
    "Measurement",
    "Span",
    "Stop",
    "Timeline",
    "build_timeline",
    "epoch",
    "error_line",
    "figure_of",
    "figure_text",
    "journal_vars",
    "role_of",
    "substitute",
    "text_vars",
    "timeline_from_dict",
    "timeline_of",
    "window_at",
]
