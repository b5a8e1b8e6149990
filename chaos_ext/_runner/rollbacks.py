"""When the experiment's rollbacks run: exactly when its method started, on every ending.

The rule (docs/verdicts.md): a run whose method started may have injected a
fault, so its rollbacks run however it ends: completed, deviated, failed,
aborted by a stop condition, Ctrl-C, SIGTERM, and an ungraceful exit
(``chaoslib.exit.exit_ungracefully``, SIGUSR2, after which chaoslib itself
skips them). A run whose method never started (the steady state did not hold
before it, settling ran out of time, a safety control refused the run)
injected nothing: its rollbacks do not run, so a rollback that cannot work on
an untouched system (``remove_deny_all_ingress`` with no cluster) does not
turn ``unsteady`` into ``rollback-failed``. The ledger sweep runs either way.

:class:`RollbackPolicy` is a chaoslib run-event handler that sees the method
start, captures the run's configuration and secrets, and marks an ungraceful
exit; :func:`rollbacks_when_injected` puts chaoslib's ``run_rollback`` under
that rule for the duration of a run; :func:`run_skipped_rollbacks` plays the
rollbacks chaoslib skipped after an ungraceful exit.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from chaoslib import run as chaoslib_run
from chaoslib.run import RunEventHandler, get_background_pools

from chaos_ext._runner import signals
from chaos_ext._runner.signals import on_ungraceful

__all__ = [
    "NOT_INJECTED",
    "RollbackPolicy",
    "rollbacks_when_injected",
    "run_skipped_rollbacks",
]

NOT_INJECTED = "nothing was injected (the method did not run): rollbacks not needed"
UNGRACEFUL_EXIT_CODE = 30  # chaoslib.exit: SIGUSR2 -> SystemExit(30), "skip the rollbacks"


class RollbackPolicy(RunEventHandler):  # type: ignore[misc]
    """What a run did that decides its rollbacks (register it on the runner)."""

    def __init__(self) -> None:
        self.method_started = False
        self.rollbacks_started = False
        self.ungraceful = False
        self.configuration: dict[str, Any] = {}
        self.secrets: dict[str, Any] = {}

    def started(self, experiment: dict[str, Any], journal: dict[str, Any]) -> None:
        # chaoslib installed its SIGUSR2 handler just before this event
        on_ungraceful(self._ungraceful)

    def _ungraceful(self, signum: int, frame: FrameType | None) -> None:
        self.ungraceful = True
        raise SystemExit(UNGRACEFUL_EXIT_CODE)  # as chaoslib's own handler does

    def running(
        self,
        experiment: Any,
        journal: Any,
        configuration: Any,
        secrets: Any,
        schedule: Any,
        settings: Any,
    ) -> None:
        self.configuration = configuration or {}
        self.secrets = secrets or {}

    def start_method(self, experiment: dict[str, Any]) -> None:
        self.method_started = True

    def start_rollbacks(self, experiment: dict[str, Any]) -> None:
        self.rollbacks_started = True


@contextmanager
def rollbacks_when_injected(policy: RollbackPolicy) -> Iterator[None]:
    """chaoslib plays the rollbacks, whatever its rollback strategy, iff the method started."""
    original = chaoslib_run.run_rollback

    def run_rollback(
        strategy: str,
        pool: Any,
        experiment: Any,
        journal: Any,
        configuration: Any,
        secrets: Any,
        registry: Any,
        dry: Any,
    ) -> None:
        if not policy.method_started:
            journal.setdefault("gameday", {})["rollbacks_skipped"] = NOT_INJECTED
            return
        original("always", pool, experiment, journal, configuration, secrets, registry, dry)

    chaoslib_run.run_rollback = run_rollback
    try:
        yield
    finally:
        chaoslib_run.run_rollback = original


def run_skipped_rollbacks(
    policy: RollbackPolicy, experiment: dict[str, Any], journal: dict[str, Any], registry: Any
) -> bool:
    """Play the rollbacks chaoslib skipped after its method started: after an ungraceful
    exit, or when an exception left its run loop before them; True when it did."""
    if policy.rollbacks_started or not (policy.ungraceful or policy.method_started):
        return False
    gameday = journal.setdefault("gameday", {})
    if policy.ungraceful:
        gameday["ended"] = "ungracefully"
    if not policy.method_started:
        gameday["rollbacks_skipped"] = NOT_INJECTED
        return False
    signals.rollbacks_begin()  # from here a stop never cuts a rollback short
    _, pool = get_background_pools(experiment)
    try:
        chaoslib_run.run_rollback(
            "always",
            pool,
            experiment,
            journal,
            policy.configuration,
            policy.secrets,
            registry,
            experiment.get("dry"),
        )
    finally:
        if pool is not None:
            pool.shutdown(wait=True)
    gameday["rollbacks_run_by"] = (
        "gameday (chaoslib skips them after an ungraceful exit)"
        if policy.ungraceful
        else "gameday (the run left chaoslib's loop before its rollbacks)"
    )
    return True
