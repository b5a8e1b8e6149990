"""What a run means: its outcome, its exit code and what may still be injected (pure).

A Chaos Toolkit journal plus gameday's ledger sweep decide one *outcome*:

==================  ====  ==========================================================
outcome             exit  meaning
==================  ====  ==========================================================
``held``            0     the hypothesis held before, during and after the faults
``deviated``        1     the faults ran and the hypothesis was not met during/after
``unsteady``        4     the hypothesis was not met *before* the method (or never
                          settled): nothing was injected, nothing was proven
``failed``          2     an action did not run as designed (fault not injected as
                          designed), or the run raised
``aborted``         2     a stop condition fired (gameday's abort watch, or a control
                          that aborted the run): rollbacks ran
``interrupted``     2     a signal (Ctrl-C, SIGTERM) or an ungraceful exit
                          (``chaoslib.exit.exit_ungracefully``) stopped the run;
                          gameday ran the rollbacks
``not-run``         2     an earlier experiment of the batch was aborted or
                          interrupted, so this one never started
``not-recovered``   5     the faults were undone, but the hypothesis did not hold again
                          within ``recover_seconds`` (:mod:`chaos_ext._runner.recovery`)
``rollback-failed`` 2     a rollback activity did not succeed or a ledger undo failed:
                          a fault may still be injected (takes precedence over all)
``refused``         3     a safety control could not be configured or started (the
                          abort watch's Prometheus did not answer): the run stopped
                          before the hypothesis; nothing was injected
==================  ====  ==========================================================

Exit code 3 (invalid input) comes from a journal only as ``refused``: nothing ran.

*Every activity must succeed.* An activity of the method or of the rollbacks
has a *failing result* when chaoslib recorded it as failed (it raised, timed
out, could not connect), when a process exited non-zero, or when an HTTP
activity was answered with a status of 400 or more (chaoslib only logs a
warning for the last two). A failing method activity makes the run ``failed``,
a failing rollback ``rollback-failed``. An experiment accepts a failing result
only by naming the activity in its gameday extension:
``{"name": "gameday", "accept_failures": ["activity name", ...]}``; reports
show every accepted failure. The full table of providers, phases and endings is
docs/verdicts.md.

Several experiments give the most severe exit code, in the order
2 (failed) > 5 (not-recovered) > 1 (deviated) > 4 (unsteady) > 0 (held); 3 stops a
batch before it runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "EXIT_DEVIATED",
    "EXIT_FAILED",
    "EXIT_HELD",
    "EXIT_INVALID",
    "EXIT_NOT_RECOVERED",
    "EXIT_UNSTEADY",
    "OUTCOMES",
    "OUTCOME_TEXT",
    "RETRY_COMMAND",
    "accepted_failures",
    "exit_code_for",
    "failing_result",
    "final_outcome",
    "first_stop",
    "hypothesis_outcome",
    "method_failures",
    "outcome_of",
    "rollback_problems",
    "unsteady_reason",
    "worst_exit",
]

EXIT_HELD = 0
EXIT_DEVIATED = 1
EXIT_FAILED = 2
EXIT_INVALID = 3
EXIT_UNSTEADY = 4
EXIT_NOT_RECOVERED = 5

OUTCOMES: Mapping[str, int] = {
    "held": EXIT_HELD,
    "deviated": EXIT_DEVIATED,
    "unsteady": EXIT_UNSTEADY,
    "failed": EXIT_FAILED,
    "aborted": EXIT_FAILED,
    "interrupted": EXIT_FAILED,
    "not-run": EXIT_FAILED,
    "not-recovered": EXIT_NOT_RECOVERED,
    "rollback-failed": EXIT_FAILED,
    "refused": EXIT_INVALID,
}

OUTCOME_TEXT: Mapping[str, str] = {
    "held": "the steady state held before, during and after the faults",
    "deviated": "the faults ran and the system did not stay within tolerance",
    "unsteady": ("the system was not in steady state before the fault; nothing was injected"),
    "failed": "the run failed: an action did not run as designed, so nothing was proven",
    "aborted": "a stop condition fired: the run was aborted and rolled back",
    "interrupted": "the run was interrupted (signal or ungraceful exit); rollbacks ran",
    "not-run": "the experiment did not run: an earlier one of the batch was stopped",
    "not-recovered": (
        "the fault was removed, but the system did not return to its steady state in time"
    ),
    "rollback-failed": ("a rollback did not complete: a fault may still be injected"),
    "refused": "a safety control was not ready: the run did not start; nothing was injected",
}

RETRY_COMMAND = "gameday rollback"

# most severe first; EXIT_INVALID never mixes with run results (nothing runs)
_SEVERITY = (
    EXIT_INVALID,
    EXIT_FAILED,
    EXIT_NOT_RECOVERED,
    EXIT_DEVIATED,
    EXIT_UNSTEADY,
    EXIT_HELD,
)


def exit_code_for(outcome: str) -> int:
    """The exit code of one outcome (an unknown outcome fails closed: 2)."""
    return OUTCOMES.get(outcome, EXIT_FAILED)


def worst_exit(codes: Iterable[int]) -> int:
    """The most severe of ``codes``: 3 > 2 > 5 > 1 > 4 > 0 (0 for none)."""
    found = set(codes)
    for code in _SEVERITY:
        if code in found:
            return code
    return EXIT_FAILED if found else EXIT_HELD


def _before_met(journal: Mapping[str, Any]) -> bool | None:
    before = (journal.get("steady_states") or {}).get("before")
    if not isinstance(before, Mapping):
        return None
    met = before.get("steady_state_met")
    return None if met is None else bool(met)


def _injects(journal: Mapping[str, Any]) -> bool:
    method = (journal.get("experiment") or {}).get("method") or []
    return any(isinstance(a, Mapping) and a.get("type") == "action" for a in method)


def _gameday_extension(journal: Mapping[str, Any]) -> Mapping[str, Any]:
    for ext in (journal.get("experiment") or {}).get("extensions") or []:
        if isinstance(ext, Mapping) and ext.get("name") == "gameday":
            return ext
    return {}


def accepted_failures(journal: Mapping[str, Any]) -> frozenset[str]:
    """Activity names whose failing result the experiment accepts (gameday extension
    ``accept_failures``)."""
    names = _gameday_extension(journal).get("accept_failures") or []
    return frozenset(str(n) for n in names) if isinstance(names, list) else frozenset()


def _exception_text(run: Mapping[str, Any]) -> str:
    error = run.get("exception")
    if isinstance(error, list):
        error = next((str(x).strip() for x in reversed(error) if str(x).strip()), "")
    return str(error or "")


def _cut_short(run: Mapping[str, Any]) -> str:
    """An activity a stop ended: how long it ran, and what stopped it (never "did not run")."""
    seconds = run.get("gameday_cut_short_after_s")
    ran = f" after {float(seconds):.1f} s" if isinstance(seconds, int | float) else ""
    by = run.get("gameday_cut_short_by")
    return f"cut short{ran}" + (f" ({by})" if by else "")


def failing_result(run: Mapping[str, Any]) -> str | None:
    """Why one activity run of the method or the rollbacks failed, or None.

    chaoslib records an activity that raised (or timed out) as ``failed``, but a
    process that exits non-zero and an HTTP answer of 400 or more as
    ``succeeded`` with a warning in the log: both are failures here.
    """
    status = run.get("status")
    if status == "interrupted":
        return _cut_short(run)
    if status != "succeeded":
        error = _exception_text(run)
        return f"{status or 'did not run'}" + (f": {error}" if error else "")
    return _answer_failure(run)


def _answer_failure(run: Mapping[str, Any]) -> str | None:
    """A process that exited non-zero, an HTTP answer of 400 or more (chaoslib: succeeded)."""
    provider = (run.get("activity") or {}).get("provider") or {}
    output = run.get("output")
    if not isinstance(output, Mapping):
        return None
    code = output.get("status")
    if not isinstance(code, int) or isinstance(code, bool):
        return None
    if provider.get("type") == "process" and code != 0:
        stderr = " ".join(str(output.get("stderr") or "").split())[:120]
        return f"exited {code}" + (f": {stderr}" if stderr else "")
    if provider.get("type") == "http" and code >= 400:
        return f"answered HTTP {code}"
    return None


def _failures(runs: Any, journal: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(name, why)`` of the runs with a failing result the experiment does not accept."""
    accepted = accepted_failures(journal)
    found = []
    for run in runs or []:
        if not isinstance(run, Mapping):
            continue
        name = str((run.get("activity") or {}).get("name", "?"))
        why = failing_result(run)
        if why is not None and name not in accepted:
            found.append((name, why))
    return found


def method_failures(journal: Mapping[str, Any]) -> list[str]:
    """One line per method activity (action or probe) with an unaccepted failing result."""
    return [f"'{name}' {why}" for name, why in _failures(journal.get("run"), journal)]


def _action_failed(journal: Mapping[str, Any]) -> bool:
    return bool(method_failures(journal))


def first_stop(journal: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The stop that decided the run (``gameday.stops``' first that stopped it), or None."""
    for stop in (journal.get("gameday") or {}).get("stops") or []:
        if isinstance(stop, Mapping) and str(stop.get("effect", "")).startswith("stopped"):
            return stop
    return None


def _aborted(journal: Mapping[str, Any]) -> bool:
    """A stop condition stopped the run. The first stop decides (a SIGTERM before the
    condition fired is ``interrupted``); a journal without ``gameday.stops`` (plain
    ``chaos run`` with the abort control, an older gameday) by ``gameday.abort.fired``.
    chaoslib's own status "aborted" (an unexpected error in the method) is no stop
    condition."""
    first = first_stop(journal)
    if first is not None:
        return first.get("cause") == "stop-condition"
    abort = (journal.get("gameday") or {}).get("abort")
    return isinstance(abort, Mapping) and isinstance(abort.get("fired"), Mapping)


def _stopped_before_start(journal: Mapping[str, Any]) -> str | None:
    """``refused`` (a safety control was not ready) or ``unsteady`` (did not settle)."""
    gameday = journal.get("gameday") or {}
    if gameday.get("refused"):
        return "refused"
    settle = gameday.get("settle")
    if isinstance(settle, Mapping) and settle.get("settled") is False:
        return "unsteady"
    return None


def hypothesis_outcome(journal: Mapping[str, Any]) -> str:
    """held | deviated | unsteady | failed | aborted | interrupted | not-run | refused
    (rollbacks aside).

    ``unsteady`` when the before-method hypothesis was not met (chaoslib then
    skips the method: nothing was injected) or settling ran out of time
    (``gameday.settle.settled`` false). A failed *action* is ``failed``.

    An experiment whose method has no action (a pure check, such as an edge
    configuration audit) has nothing to inject: its hypothesis *is* the test,
    so a miss before the (empty) method is ``deviated``, not ``unsteady``.
    """
    for decides in _RULES:
        outcome = decides(journal)
        if outcome is not None:
            return outcome
    return "held"


def _not_run(journal: Mapping[str, Any]) -> str | None:
    return "not-run" if (journal.get("gameday") or {}).get("not_run") else None


def _stopped(journal: Mapping[str, Any]) -> str | None:
    if _aborted(journal):
        return "aborted"
    first = first_stop(journal)
    if first is not None or journal.get("status") == "interrupted":
        return "interrupted"
    return None


def _not_injected(journal: Mapping[str, Any]) -> str | None:
    if _before_met(journal) is False and not journal.get("run"):
        return "unsteady" if _injects(journal) else "deviated"
    return None


def _failed_or_deviated(journal: Mapping[str, Any]) -> str | None:
    if _action_failed(journal):
        return "failed"
    if journal.get("deviated"):  # chaoslib's "failed" here is a probe that raised: deviated
        return "deviated"
    # chaoslib's "aborted" without a stop condition: an unexpected error left the method
    return "failed" if journal.get("status") in ("failed", "aborted") else None


# first match wins; nothing matched: held
_RULES = (_not_run, _stopped_before_start, _stopped, _not_injected, _failed_or_deviated)


def unsteady_reason(journal: Mapping[str, Any]) -> str:
    """Which hypothesis probes were out of tolerance (or failed) before the method."""
    gameday = journal.get("gameday") or {}
    settle = gameday.get("settle") if isinstance(gameday.get("settle"), Mapping) else {}
    before = (journal.get("steady_states") or {}).get("before") or {}
    misses = []
    for run in before.get("probes") or [] if isinstance(before, Mapping) else []:
        if not isinstance(run, Mapping) or run.get("tolerance_met") is not False:
            continue
        name = (run.get("activity") or {}).get("name", "?")
        if run.get("status") == "failed":
            misses.append(f"'{name}' could not be measured")
        else:
            misses.append(f"'{name}' = {_short(run.get('output'))} out of tolerance")
    what = "; ".join(misses) or "the hypothesis was not met"
    if settle and settle.get("settled") is False:
        return f"did not settle within {settle.get('seconds'):g} s: {what}"
    return f"before the method: {what}"


def _short(value: Any) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= 60 else text[:57] + "..."


def _rollback_activity_problems(journal: Mapping[str, Any]) -> list[str]:
    retries = (journal.get("gameday") or {}).get("rollback_retries") or []
    retried = {str(r.get("name")) for r in retries if r.get("status") == "succeeded"}
    return [
        f"rollback '{name}' {why}"
        for name, why in _failures(journal.get("rollbacks"), journal)
        if name not in retried
    ]


def rollback_problems(
    journal: Mapping[str, Any],
    sweep: Sequence[Mapping[str, Any]] = (),
    ledger: Sequence[Mapping[str, Any]] = (),
) -> list[str]:
    """What may still be injected after this run, one line each (empty: all undone).

    A rollback activity whose status is not ``succeeded``; a ledger undo that
    failed during the sweep; a ledger entry of this run still not closed.
    """
    problems = _rollback_activity_problems(journal)
    for undo in sweep:
        if not undo.get("ok"):
            problems.append(
                f"fault {undo.get('kind')} on {undo.get('target')} (ledger {undo.get('id')}) "
                f"could not be undone: {undo.get('note') or 'unknown error'}"
            )
    failed_ids = {str(u.get("id")) for u in sweep if not u.get("ok")}
    for entry in ledger:
        if entry.get("state") != "closed" and str(entry.get("id")) not in failed_ids:
            problems.append(
                f"fault {entry.get('kind')} on {entry.get('target')} (ledger {entry.get('id')}) "
                f"is still open"
            )
    return problems


def outcome_of(journal: Mapping[str, Any]) -> str:
    """The outcome of a journal written by ``gameday run`` (or plain ``chaos run``).

    Always computed from what the journal records, never taken from a recorded
    ``gameday.outcome`` (a journal of an older gameday may say ``held`` over a
    failed rollback): ``rollback-failed`` when anything may still be injected,
    else :func:`hypothesis_outcome`.
    """
    gameday = journal.get("gameday") or {}
    sweep = [s for s in gameday.get("sweep") or [] if isinstance(s, Mapping)]
    ledger = [e for e in gameday.get("ledger") or [] if isinstance(e, Mapping)]
    problems = rollback_problems(journal, sweep, ledger)
    return final_outcome(journal, hypothesis_outcome(journal), problems)


def final_outcome(journal: Mapping[str, Any], hypothesis: str, problems: Sequence[str]) -> str:
    """``rollback-failed`` over everything; then ``not-recovered`` over ``held`` and
    ``deviated`` (the recovery check ran and the hypothesis never held again); else the
    hypothesis' outcome."""
    if problems:
        return "rollback-failed"
    recovery = (journal.get("gameday") or {}).get("recovery")
    if (
        hypothesis in ("held", "deviated")
        and isinstance(recovery, Mapping)
        and recovery.get("checked")
        and recovery.get("recovered") is False
    ):
        return "not-recovered"
    return hypothesis
