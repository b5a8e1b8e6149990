"""The one exception tree of chaos_ext.

Every error an activity raises is an :class:`chaoslib.exceptions.ActivityFailed`,
so Chaos Toolkit records it as a failed activity (and the gameday runner still
rolls back). Third-party errors (psycopg, paramiko, kubernetes, httpx, netlink)
are converted where the call is made, with ``raise ... from exc``; they never
leak out of an activity.

::

    ActivityFailed                      (chaoslib)
    └── ChaosExtError                   anything raised by chaos_ext
        ├── InvalidArgument             bad input: nothing was changed
        ├── PreflightFailed             the target cannot take this fault: nothing was changed
        │   └── PrivilegeMissing        this process lacks a privilege (capability, root,
        │                               credentials): `gameday run` refuses before injecting
        ├── TargetGone                  the target (namespace, process, interface) no longer exists
        ├── TransportError              the way to a target failed: namespace, SSH, pod placement
        ├── LedgerError                 the fault ledger cannot be read or written
        │   ├── LedgerInconsistent      damaged, emptied or missing ledger: lists what may be open
        │   └── RollbackFailed          an undo did not complete; the entry stays open
        │       └── TargetMismatch      the undo would reach another system than the recorded one
        ├── KubernetesError             the cluster API: a call failed or no cluster is configured
        │   └── NoClusterCredentials    no kubeconfig, in-cluster or KUBERNETES_HOST (also a
        │                               PrivilegeMissing)
        ├── PrometheusError             the metrics source: a query failed
        │   ├── PrometheusUnreachable   connect/read failure or timeout
        │   ├── PrometheusHTTPError     non-2xx answer (status quoted)
        │   ├── PromQLError             Prometheus rejected the query (its message quoted)
        │   └── EmptyResult             no sample where a value is required
        │
        │   one error per fault domain, defined in its own package:
        ├── NetworkError                chaos_ext.network.errors: tc/netem, the qdisc tree
        ├── DnsError                    chaos_ext.dns.errors: resolver saturation and floods
        ├── DatabaseError               chaos_ext.db.errors: connection exhaustion, headroom probes
        ├── SidecarError                chaos_ext.sidecar.errors: injector templates, drift
        ├── EnvoyError                  chaos_ext.envoy.errors: config_dump fetching and auditing
        ├── LoadError                   chaos_ext.load.errors: HTTP load driver
        └── SandboxError                chaos_ext._products.sandbox.errors: the local sandbox

This module holds the root and the bases every layer shares, and nothing a
single fault domain owns. ``_core`` (below the fault domains, which it may not
import) raises :class:`TransportError` for its transports (``_core.ssh``,
``_core.targets``), :class:`KubernetesError` for the cluster API (``_core.k8s``)
and the :class:`PrometheusError` branch for the metrics source
(``_core.prometheus_api``); those stay here, named for what failed. The node
domain raises :class:`KubernetesError` itself (its faults are cluster API
calls). A new fault domain adds ``<domain>/errors.py`` with one
``<Name>Error(ChaosExtError)`` and a line in the tree above;
``tests/test_error_homes.py`` checks both rules.

Messages quote the bad value and say what to do next.

Input the runner and the reports cannot use is not an activity failure; it has
its own branch, outside chaoslib's, so that no ``except ActivityFailed`` takes
it for a failed activity::

    Exception
    └── InputError                      a file or a declaration gameday cannot use
        ├── ExperimentInvalid           an experiment cannot run as written (validate, run)
        ├── ControlProblem              a declared control would not protect the run
        ├── JournalError                not a readable Chaos Toolkit journal
        ├── EnvelopeError               not a readable envelope.json
        └── FindingRulesError           a findings rule file gameday cannot use
    ConnectFailure                      one database connection attempt failed (the
                                        exhaustion loop's signal; never leaves chaos_ext.db)

One signal stands outside the tree on purpose: :class:`RunRefused` (a
``BaseException``) stops a run *before anything is injected* when a safety
control cannot be imported, configured or started. chaoslib catches every
``Exception`` raised by controls and run-event handlers and carries on
unprotected; a ``BaseException`` is the only way through, and ``gameday run``
turns it into exit 3.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chaoslib.exceptions import ActivityFailed

__all__ = [
    "ChaosExtError",
    "ConnectFailure",
    "ControlProblem",
    "EmptyResult",
    "EnvelopeError",
    "ExperimentInvalid",
    "FindingRulesError",
    "InputError",
    "InvalidArgument",
    "JournalError",
    "KubernetesError",
    "LedgerError",
    "LedgerInconsistent",
    "NoClusterCredentials",
    "PreflightFailed",
    "PrivilegeMissing",
    "PromQLError",
    "PrometheusError",
    "PrometheusHTTPError",
    "PrometheusUnreachable",
    "RollbackFailed",
    "RunRefused",
    "TargetGone",
    "TargetMismatch",
    "TransportError",
]


class ChaosExtError(ActivityFailed):  # type: ignore[misc]
    """Base of every error raised by chaos_ext."""


class InvalidArgument(ChaosExtError):
    """An activity argument is invalid; raised before anything is changed."""


class PreflightFailed(ChaosExtError):
    """The target lacks something the fault needs (kernel feature, capability)."""


class PrivilegeMissing(PreflightFailed):
    """This process (or the SSH user) lacks a privilege the fault needs: a capability
    (CAP_NET_ADMIN), root, or credentials for the cluster. Nothing was changed; the
    plan of the fault says so, and ``gameday run`` refuses before it injects anything."""


class TargetGone(ChaosExtError):
    """The fault's target no longer exists (namespace, process, interface).

    Undo handlers treat it as "the fault went with its target": they decide on
    this type, never on an error's text.
    """


class TransportError(ChaosExtError):
    """The way to a fault's target failed: entering a namespace, SSH, a pod's placement.

    Raised by the shared transports (``_core.ssh``, ``_core.targets``), whatever
    the fault domain that uses them.
    """


class LedgerError(ChaosExtError):
    """The fault ledger cannot be read or written."""


class LedgerInconsistent(LedgerError):
    """The ledger cannot prove what is open: damaged, emptied, missing or out of step.

    ``problems`` says what is wrong; ``suspects`` lists the entries (as
    ``Entry.as_dict()``) that either copy still shows open: faults that may
    still be injected. ``gameday ledger --repair`` rebuilds it when it can.
    """

    def __init__(
        self, message: str, problems: list[str], suspects: list[dict[str, Any]] | None = None
    ) -> None:
        super().__init__(message)
        self.problems = problems
        self.suspects = suspects or []


class RollbackFailed(LedgerError):
    """Undoing a ledger entry failed; the entry is left open for a retry."""


class TargetMismatch(RollbackFailed):
    """The undo would act on another system (cluster, host) than the one recorded: refused."""


class KubernetesError(ChaosExtError):
    """A Kubernetes API call failed, or no cluster is configured (raised by ``_core.k8s``)."""


class NoClusterCredentials(KubernetesError, PrivilegeMissing):
    """No way to reach a cluster was given: no kubeconfig, not in a pod, no KUBERNETES_HOST."""


class PrometheusError(ChaosExtError):
    """A query to the metrics source (the Prometheus HTTP API) failed."""


class PrometheusUnreachable(PrometheusError):
    """Prometheus could not be reached in time."""


class PrometheusHTTPError(PrometheusError):
    """Prometheus answered with a non-success HTTP status."""


class PromQLError(PrometheusError):
    """Prometheus rejected the PromQL expression."""


class EmptyResult(PrometheusError):
    """A query returned no sample where a value was required."""


class RunRefused(BaseException):
    """A safety control is not ready: the run must not start (nothing was injected).

    Raised from a run-event handler before the steady-state hypothesis, so it
    passes through chaoslib (which swallows ``Exception``); ``gameday run``
    reports it with exit 3.
    """


class InputError(Exception):
    """A file or a declaration gameday cannot use (not an activity failure)."""


class ExperimentInvalid(InputError):
    """An experiment file cannot be run as written."""

    def __init__(
        self, path: Path | str, where: str, message: str, *, control: bool = False
    ) -> None:
        super().__init__(f"{path}: {where}: {message}")
        self.path = str(path)
        self.where = where
        self.message = message
        self.control = control  # a safety control that would not protect the run


class ControlProblem(InputError):
    """One control that cannot protect the run: where it is declared and why."""

    def __init__(self, where: str, name: str, reason: str) -> None:
        super().__init__(f"{where}: control {name!r}: {reason}")
        self.where, self.name, self.reason = where, name, reason


class JournalError(InputError):
    """A file that is not a readable Chaos Toolkit journal."""


class EnvelopeError(InputError):
    """A file that is not a readable envelope.json."""


class FindingRulesError(InputError):
    """A finding rule file gameday cannot use (``probes/findings/``, ``$GAMEDAY_FINDINGS``)."""


class ConnectFailure(Exception):
    """A connection attempt failed; ``message`` is one line, password-free."""

    def __init__(self, message: str, *, kind: str, server_text: str) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.server_text = server_text

    @property
    def limit(self) -> bool:
        """The server refused because its connection slots are used up."""
        return self.kind == "limit"
