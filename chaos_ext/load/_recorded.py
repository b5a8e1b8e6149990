"""A load recorded in the fault ledger: what drive_http_load and baselines share."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from chaos_ext._core.ledger import Entry, default_ledger, fault, new_entry_id, set_deadline, undo
from chaos_ext.load import _locate
from chaos_ext.load.driver import (
    RunningLoad,
    check_ca_file,
    load_results,
    start_load,
    wait_load,
)
from chaos_ext.load.spec import LoadSpec

__all__ = ["finish", "start_recorded"]


def start_recorded(spec: LoadSpec, *, module: str) -> tuple[Entry, RunningLoad]:
    """Record the load in the ledger (undo: ``module``'s handler), then start it.

    The recipe is complete before the helper starts (its token is the entry
    id, its results folder named after it): a kill at any point leaves an
    entry that ``gameday rollback`` closes.
    """
    check_ca_file(spec)  # bad input fails before anything is recorded
    target = spec.name or _locate.describe_url(spec.urls[0])
    entry_id = new_entry_id()
    recipe: dict[str, Any] = {
        "name": spec.name,
        "urls": [_locate.describe_url(u) for u in spec.urls],
        "results_dir": str(_locate.results_root() / entry_id),
    }
    with fault(
        kind=_locate.KIND, target=target, recipe=recipe, module=module, entry_id=entry_id
    ) as entry:
        load = start_load(spec, results_dir=Path(recipe["results_dir"]), token=entry.id)
        default_ledger().update_recipe(entry.id, {**recipe, **load.as_dict()})
    # it ends by itself then (its last requests within their timeout): if this process is
    # killed, its watchdog closes the entry then, stopping whatever is left
    set_deadline(entry, max(0.0, load.end - time.time()) + spec.timeout)
    return entry, load


def finish(entry: Entry, load: RunningLoad, spec: LoadSpec) -> dict[str, Any]:
    """Wait for the load to end by itself, close its ledger entry, return its results."""
    wait_load(
        entry.id,
        timeout=max(0.0, load.end - time.time()) + 2 * spec.timeout + 15,
        results_dir=load.results_dir,
    )
    wait_load(entry.id, timeout=3.0)  # the coordinator exits right after done.json
    undo(default_ledger().get(entry.id) or entry)
    return load_results(load.results_dir)
