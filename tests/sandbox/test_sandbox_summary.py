"""The end-of-demo summary: each check's verdict, the action, and the fault ledger's row."""

from __future__ import annotations

from chaos_ext._products.sandbox.summary import rows


def _probe(name: str, output: object, met: bool) -> dict[str, object]:
    return {"activity": {"name": name}, "output": output, "tolerance_met": met}


def test_a_deviation_shows_the_injected_fault_from_the_ledger() -> None:
    journal = {
        "steady_states": {
            "before": {"probes": [_probe("errors", 0.0, True)]},
            "after": {"probes": [_probe("errors", 1.0, False)]},
        },
        "run": [
            {
                "activity": {"type": "action", "name": "hold"},
                "status": "succeeded",
                "output": {"held": 25, "opened": 25, "pid": 7},
            }
        ],
        "gameday": {
            "ledger": [
                {
                    "id": "ab12",
                    "kind": "dnsmasq-tcp-hold",
                    "target": "10.77.0.30:53",
                    "state": "closed",
                    "created_at": 100.0,
                    "closed_at": 114.4,
                }
            ]
        },
    }
    assert rows(journal) == [
        ("errors (before)", "0", "held"),
        ("errors (after)", "1", "DEVIATED"),
        ("action hold", "held=25, opened=25", "succeeded"),
        ("fault dnsmasq-tcp-hold on 10.77.0.30:53", "ledger ab12, on for 14 s", "closed"),
    ]


def test_a_failed_check_before_the_method_is_not_steady_not_deviated() -> None:
    journal = {"steady_states": {"before": {"probes": [_probe("p50-added", 0.4, False)]}}}
    assert rows(journal) == [("p50-added (before)", "0.4", "NOT STEADY")]


def test_a_probe_with_a_tolerance_target_shows_what_was_judged() -> None:
    """load_window_stats returns a whole summary; the tolerance judges one field of it."""
    probe = {
        "activity": {
            "name": "search-errors",
            "tolerance": {"type": "range", "target": "error_ratio", "range": [0, 0.01]},
        },
        "output": {"p95_ms": 18.3, "error_ratio": 0.968, "sent": 300},
        "tolerance_met": False,
    }
    journal = {"steady_states": {"after": {"probes": [probe]}}}
    assert rows(journal) == [("search-errors (after)", "error_ratio=0.968", "DEVIATED")]
