"""The end-of-demo summary: each check's verdict in its window, the action, the ledger's row."""

from __future__ import annotations

from datetime import UTC, datetime

from chaos_ext._products.sandbox.summary import rows

T0 = 1_800_000_000.0


def _iso(offset: float) -> str:
    return datetime.fromtimestamp(T0 + offset, tz=UTC).isoformat()


def _probe(name: str, output: object, met: bool, at: float) -> dict[str, object]:
    return {
        "activity": {"name": name, "type": "probe"},
        "output": output,
        "tolerance_met": met,
        "status": "succeeded",
        "start": _iso(at),
        "end": _iso(at + 0.1),
    }


def test_a_deviation_shows_the_injected_fault_from_the_ledger() -> None:
    journal = {
        "start": _iso(0),
        "steady_states": {
            "before": {"probes": [_probe("errors", 0.0, True, 0)]},
            "after": {"probes": [_probe("errors", 1.0, False, 12)]},
        },
        "run": [
            {
                "activity": {"type": "action", "name": "hold"},
                "status": "succeeded",
                "output": {"held": 25, "opened": 25, "pid": 7},
                "start": _iso(1),
                "end": _iso(1.5),
            }
        ],
        "gameday": {
            "ledger": [
                {
                    "id": "ab12",
                    "kind": "dnsmasq-tcp-hold",
                    "target": "10.77.0.30:53",
                    "state": "closed",
                    "created_at": T0 + 1.0,
                    "closed_at": T0 + 15.4,
                }
            ],
            "recovery": {
                "checked": True,
                "recovered": True,
                "checks": [
                    {
                        "probe": "errors",
                        "at": T0 + 16,
                        "value": 1.0,
                        "text": "1",
                        "tolerance_met": False,
                    },
                    {
                        "probe": "errors",
                        "at": T0 + 17,
                        "value": 0.0,
                        "text": "0",
                        "tolerance_met": True,
                    },
                ],
            },
        },
    }
    assert rows(journal) == [
        ("errors (before the faults)", "0", "held"),
        ("errors (with the faults on)", "1", "DEVIATED"),
        ("errors (after the undo)", "0", "held"),  # the recovery's last check
        ("action hold", "held=25, opened=25", "succeeded"),
        ("fault dnsmasq-tcp-hold on 10.77.0.30:53", "ledger ab12, on for 14 s", "closed"),
    ]


def test_a_failed_check_before_the_method_is_not_steady_not_deviated() -> None:
    journal = {
        "start": _iso(0),
        "steady_states": {"before": {"probes": [_probe("p50-added", 0.4, False, 0)]}},
    }
    assert rows(journal) == [("p50-added (before the faults)", "0.4", "NOT STEADY")]


def test_a_probe_with_a_tolerance_target_shows_what_was_judged() -> None:
    """load_window_stats returns a whole summary; the tolerance judges one field of it."""
    probe = _probe("search-errors", {"p95_ms": 18.3, "error_ratio": 0.968, "sent": 300}, False, 30)
    tolerance = {"type": "range", "target": "error_ratio", "range": [0, 0.01]}
    probe["activity"] = {"name": "search-errors", "tolerance": tolerance}
    journal = {
        "start": _iso(0),
        "steady_states": {"after": {"probes": [probe]}},
        "run": [
            {
                "activity": {"type": "action", "name": "limit"},
                "status": "succeeded",
                "output": {"pps": 50},
                "start": _iso(10),
                "end": _iso(10.2),
            }
        ],
    }
    assert rows(journal)[0] == (
        "search-errors (with the faults on)",
        "error_ratio 0.968",
        "DEVIATED",
    )
