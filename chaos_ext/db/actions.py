"""Database actions: exhaust a server's connection slots, and release them."""

from __future__ import annotations

from typing import Any

from chaos_ext._core import helper as _helper
from chaos_ext._core.contract import (
    LEDGER_ID,
    Configuration,
    Secrets,
    fault_action,
    roll_back,
    rollback_activity,
)
from chaos_ext._core.ledger import (
    Entry,
    default_ledger,
    fault,
    machine_scope,
    undo_after,
)
from chaos_ext._core.validation import validated_by
from chaos_ext.db._credentials import connect_params
from chaos_ext.db._engines import (
    ConnectFailure,
    ConnectParams,
    close,
    connect,
    scrub,
    server_identity,
)
from chaos_ext.db._target import check_exhaust_arguments, engine_of, parse_target
from chaos_ext.db.errors import DatabaseError
from chaos_ext.db.leftovers import application_name
from chaos_ext.errors import ChaosExtError

__all__ = ["exhaust_connections", "release_connections"]

KIND = "db-connections"
OPEN_BUDGET = 120.0  # seconds the helper may spend opening connections
_STARTUP = 20.0  # helper interpreter start and driver import, generously


@fault_action(rollback="release_connections")
@validated_by(check_exhaust_arguments)
def exhaust_connections(
    engine: str,
    host: str = "127.0.0.1",
    port: int = 0,
    database: str = "",
    user: str = "",
    target: int | str = "max",
    hold_seconds: float = 60.0,
    open_concurrency: int = 16,
    keepalive_seconds: float = 0.0,
    connect_timeout_seconds: float = 5.0,
    refill_seconds: float = 0.0,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Open and hold database connections until the target or the server's refusal.

    ``engine``: ``postgresql`` (psycopg) or ``mysql`` (pymysql: MySQL,
    MariaDB, Aurora MySQL). ``target``: a number, ``"max"`` (open until the
    server refuses; stops exactly at the refusal) or ``"max-minus-N"`` (leave
    N slots free for a normal user, from the server's max_connections and
    current use: the fewest client connections of 3 readings 0.1 s apart, so a
    client that connects per request is not counted). Credentials:
    ``user``/``password`` from the provider's secrets. Connections are opened
    ``open_concurrency`` at a time by a helper process, held for
    ``hold_seconds`` (its own hard cap), with ``SELECT 1`` on each every
    ``keepalive_seconds`` if > 0. With ``refill_seconds`` > 0 the holder also
    takes back, that often, slots that others freed (like a leak that keeps
    growing), up to the target: with ``"max"``, other clients then only get a
    slot in the moment between a close and the next refill. A refusal met
    while other attempts were in flight is confirmed one connection at a time,
    so ``refused_at`` is the server's real capacity (``burst_refused_at``
    keeps where the concurrent burst stopped). Returns opened, refused_at, the
    server's error text, max_connections, time to reach the target and
    ``ledger_id``.

    Blast radius: every client of that server (and only it) that needs a new
    connection while the slots are held. Rollback: ``release_connections``
    (the gameday ledger sweep does it too, and ``gameday rollback`` after a
    crash); wrong password, unreachable host or a bad target hold nothing.
    """
    arguments = {k: v for k, v in locals().items() if k not in ("configuration", "secrets")}
    check_exhaust_arguments(arguments)
    params = connect_params(
        engine=engine,
        host=host,
        port=port,
        database=database,
        user=user,
        connect_timeout=connect_timeout_seconds,
        secrets=secrets,
        application_name="gameday-exhaust",
    )
    wanted = str(parse_target(target))
    recipe = {
        "engine": params.engine,
        "host": params.host,
        "port": params.port,
        "database": params.database,
        "user": params.user,
        "target": wanted,
        "hold_seconds": hold_seconds,
    }
    payload = {
        "connect": params.as_payload(),
        "target": wanted,
        "hold_seconds": hold_seconds,
        "keepalive_seconds": keepalive_seconds,
        "open_concurrency": open_concurrency,
        "open_budget": OPEN_BUDGET,
        "refill_seconds": refill_seconds,
    }
    entry, ready = _hold(params, recipe, payload)
    undo_after(entry, hold_seconds)
    return {
        "engine": params.engine,
        "host": params.host,
        "port": params.port,
        **ready,
        "hold_seconds": hold_seconds,
        "keepalive_seconds": keepalive_seconds,
        "refill_seconds": refill_seconds,
        LEDGER_ID: entry.id,
    }


def _identity(params: ConnectParams) -> dict[str, Any]:
    """The ledger identity: held from this machine, against this server (one connection)."""
    try:
        conn = connect(params)
    except ConnectFailure as exc:
        raise DatabaseError(scrub(exc.message, params.password)) from None
    try:
        server = server_identity(conn, params.engine)
    except Exception as exc:  # noqa: BLE001 - any driver error: say which server, hold nothing
        raise DatabaseError(
            scrub(f"{params.where}: cannot read the server's identity: {exc}", params.password)
        ) from None
    finally:
        close(conn)
    where = {"engine": params.engine, "host": params.host, "port": params.port}
    return machine_scope(database={**where, "server": server})


def _hold(
    params: ConnectParams, recipe: dict[str, Any], payload: dict[str, Any]
) -> tuple[Entry, dict[str, Any]]:
    """Record the fault, then start the holder; the entry and the holder's report."""
    where = f"{params.engine}://{params.host}:{params.port}/{params.database}"
    identity = _identity(params)
    with fault(kind=KIND, target=where, recipe=recipe, module=__name__, identity=identity) as entry:
        # every connection says whose it is: `gameday ledger --scan --db-dsn` finds it by name
        named = {**payload["connect"], "application_name": application_name(entry.id)}
        try:
            handle = _helper.start_helper(
                module="chaos_ext.db._holder",
                payload={**payload, "connect": named},
                token=entry.id,
                ready_timeout=OPEN_BUDGET + _STARTUP + params.connect_timeout,
            )
        except ChaosExtError as exc:
            raise DatabaseError(scrub(str(exc), params.password)) from None
        default_ledger().update_recipe(entry.id, {**recipe, "pid": handle.pid})
    return entry, handle.ready


def _release_holder(entry: Entry) -> str:
    stopped = _helper.stop_helpers(entry.id)
    if not stopped:
        return f"connections to {entry.target} already released (holder gone)"
    return f"released the connections to {entry.target} (stopped {stopped} holder process)"


@rollback_activity
@validated_by()
def release_connections(
    engine: str = "",
    host: str = "",
    port: int = 0,
    include_dead_runs: bool = False,
    configuration: Configuration = None,
    secrets: Secrets = None,
) -> dict[str, Any]:
    """Close the connections held by exhaust_connections (its rollback).

    Blast radius: only holders recorded in the gameday ledger by this run;
    ``include_dead_runs`` adds holders left by runs whose runner is dead (a
    live run's holders are never touched: they are listed under
    ``left_alone``); ``engine``/``host``/``port`` narrow it further (empty or
    0: any). Idempotent. Raises RollbackFailed if a holder could not be
    stopped (the ledger entry stays open for ``gameday rollback``).
    """
    wanted_engine = engine_of(engine) if engine else ""
    book = default_ledger()
    entries = [
        e
        for e in book.open_entries()
        if e.kind == KIND
        and (not wanted_engine or e.recipe.get("engine") == wanted_engine)
        and (not host or e.recipe.get("host") == host)
        and (not port or e.recipe.get("port") == port)
    ]
    return roll_back(entries, book, include_dead_runs=include_dead_runs)
