"""Chaos Toolkit's own experiment fixtures, judged by chaoslib (child process).

``python -m support.ctk_corpus OUT`` imports chaostoolkit-lib's
``tests/fixtures/experiments.py`` (copied unchanged into
``tests/fixtures/chaostoolkit_lib/fixtures``, see its README), runs chaoslib's
``ensure_experiment_is_valid`` on every experiment it defines, writes each to
``OUT/accepted/<name>.json`` or ``OUT/refused/<name>.json`` and prints
``{name: null | "refusal"}`` as JSON.

A child process because the fixtures are the top-level package ``fixtures``
(their activities name ``fixtures.fakeext``, ``fixtures.controls.dummy`` ...):
``tests/fixtures/chaostoolkit_lib`` goes first on its ``PYTHONPATH``, as on the
``gameday validate`` that is compared with it.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

CORPUS_ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "chaostoolkit_lib"


def experiments() -> dict[str, dict[str, Any]]:
    """Every module-level experiment of the fixtures (a dict named ``...Experiment...``)."""
    from fixtures import experiments as module  # noqa: PLC0415 - only on the child's path

    return {
        name: value
        for name, value in vars(module).items()
        if name[:1].isupper() and "Experiment" in name and isinstance(value, dict)
    }


def judge(experiment: dict[str, Any]) -> str | None:
    """chaoslib's verdict: None when it accepts the experiment, else its refusal."""
    from chaoslib.experiment import ensure_experiment_is_valid  # noqa: PLC0415

    try:
        ensure_experiment_is_valid(copy.deepcopy(experiment))
    except Exception as exc:  # noqa: BLE001 - every refusal (and crash) is recorded
        return f"{type(exc).__name__}: {exc}"
    return None


def main() -> None:
    out = Path(sys.argv[1])
    verdicts: dict[str, str | None] = {}
    for kind in ("accepted", "refused"):
        (out / kind).mkdir(parents=True, exist_ok=True)
    for name, experiment in sorted(experiments().items()):
        verdicts[name] = judge(experiment)
        kind = "accepted" if verdicts[name] is None else "refused"
        (out / kind / f"{name}.json").write_text(json.dumps(experiment, indent=2, default=str))
    json.dump(verdicts, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
