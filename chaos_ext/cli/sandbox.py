"""``gameday sandbox up|down|status``: the local platform the default game day breaks."""

from __future__ import annotations

import argparse
import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from chaos_ext._core.console import make_console
from chaos_ext._products.sandbox import backends
from chaos_ext._products.sandbox.heartbeat import Heartbeat
from chaos_ext._runner.execute import EXIT_FAILED, EXIT_HELD, EXIT_INVALID
from chaos_ext.cli._options import add_var_options
from chaos_ext.errors import ChaosExtError

HELP = """\
A small platform on this machine that fails the way real ones do: network
namespaces on one bridge (app, db, dns, mon) running PostgreSQL
(max_connections 40), dnsmasq serving db.sandbox.test, a demo web service
that resolves the database over TCP DNS and queries it on every request,
an exporter (dnsmasq processes, database connections) and Prometheus.

Backends: `netns` runs it in host network namespaces; `vm` runs the same,
natively, and routes the app's traffic to the database through a 1-CPU qemu
micro-VM with Debian's kernel (a "node" at 10.77.0.50), where the DB latency
fault's netem goes over SSH: needed where the host kernel has no netem.
`auto` (default) picks netns when the host kernel has netem, else vm, and
says why.

  gameday sandbox up                 # fragile app (new DB connection per request, no DNS cache)
  gameday sandbox up --app tuned     # DNS cache, connection pool, retries
  gameday sandbox status
  gameday sandbox run experiments/sandbox/*.json --journal-dir reports/today
  gameday sandbox run --dry-run experiments/sandbox/*.json   # gameday plan there: real targets
  gameday sandbox envelope experiments/sandbox/envelope/dns-tcp-connections.json -o out/dns
  gameday sandbox run --settle 120 experiments/sandbox/01-db-latency.json
  gameday sandbox run --var ramp_to:int=40 experiments/incidents/01-eks-load-test.json
  gameday sandbox down               # removes everything; safe to run twice

`sandbox run` runs `gameday run` inside the sandbox's monitoring host (where
Prometheus, the database and the DNS server are reachable), with the
sandbox's addresses and database password given as --var-file.
"""


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "sandbox",
        help="bring the local sandbox platform up or down",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="sandbox_command", metavar="ACTION", required=True)
    for name, text in (
        ("up", "build the namespaces and start every service"),
        ("down", "stop every service and remove every namespace (idempotent)"),
        ("status", "show what runs and whether it answers"),
    ):
        action = actions.add_parser(name, help=text, description=text)
        action.add_argument(
            "--prefix", default="gd", help="names of the namespaces: <prefix>-app... (default gd)"
        )
        if name == "up":
            action.add_argument("--backend", choices=("auto", "netns", "vm"), default="auto")
            action.add_argument(
                "--app",
                choices=("fragile", "tuned"),
                default="fragile",
                dest="app_mode",
                help="the demo app's robustness (default fragile)",
            )
        if name == "status":
            action.add_argument("--json", action="store_true", help="print JSON")
        action.set_defaults(handler=handle)
    run = actions.add_parser(
        "run",
        help="run experiments inside the sandbox (gameday run there)",
        description="Run `gameday run EXPERIMENT...` in the sandbox's monitoring host.",
    )
    run.add_argument("--prefix", default="gd")
    run.add_argument("--journal-dir", default=".", help="where the journals go (default .)")
    run.add_argument("--timeout", type=float, help="cap in seconds (default 900 per --repeat)")
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="inject nothing: each fault's live targets and preflights (gameday run --dry-run)",
    )
    run.add_argument("--json", metavar="FILE", help="with --dry-run: the plans as JSON to FILE")
    run.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="run each experiment N times (gameday run --repeat)",
    )
    run.add_argument(
        "--settle",
        type=float,
        metavar="SECONDS",
        help="wait up to SECONDS for each steady state before its fault (gameday run --settle; "
        "default: the experiment's settle_seconds, 60 s for the default game day)",
    )
    add_var_options(run, purpose="over the sandbox's own (vars.json), passed to `gameday run`")
    run.add_argument("experiments", nargs="+", metavar="EXPERIMENT")
    run.set_defaults(handler=handle)
    _register_envelope(actions)


_ENVELOPE_OPTIONS = (
    ("--vary", "ACTIVITY.ARGUMENT=LOW..HIGH"),
    ("--resolution", "R|P%"),
    ("--repeats", "K"),
    ("--max-runs", "N"),
    ("--settle", "SECONDS"),
    ("--label", "TEXT"),
)


def _register_envelope(actions: Any) -> None:
    envelope = actions.add_parser(
        "envelope",
        help="find an experiment's breaking point inside the sandbox",
        description="Run `gameday envelope EXPERIMENT` in the sandbox's monitoring host "
        "(options as there; the experiment's gameday extension holds the rest).",
    )
    envelope.add_argument("--prefix", default="gd")
    envelope.add_argument(
        "--journal-dir", default=".", help="parent of the envelope's folder (default .)"
    )
    envelope.add_argument("-o", "--out", metavar="DIR", help="the envelope's folder")
    envelope.add_argument(
        "--timeout", type=float, default=3600, help="cap in seconds (default 3600)"
    )
    for option, metavar in _ENVELOPE_OPTIONS:
        envelope.add_argument(option, metavar=metavar, help=f"as in `gameday envelope {option}`")
    envelope.add_argument("experiment", metavar="EXPERIMENT")
    envelope.set_defaults(handler=handle)


def _envelope_argv(args: argparse.Namespace) -> list[str]:
    argv = ["envelope"]
    for option, _ in _ENVELOPE_OPTIONS:
        value = getattr(args, option.lstrip("-").replace("-", "_"))
        if value is not None:
            argv += [option, str(value)]
    if args.out:
        argv += ["--out", str(Path(args.out).resolve())]
    return [*argv, args.experiment]


# what `pip install 'chaos_ext[sandbox]'` adds (the sandbox extra); plain chaos_ext lacks them
SANDBOX_EXTRA = ("bcrypt", "psycopg_pool")


def missing_sandbox_extra() -> list[str]:
    """The sandbox-only libraries this installation lacks (empty when the extra is installed)."""
    return [name for name in SANDBOX_EXTRA if importlib.util.find_spec(name) is None]


def handle(args: argparse.Namespace, console: Console) -> int:
    def print_line(text: str) -> None:
        console.print(f"  {text}", highlight=False, markup=False)

    if args.sandbox_command in ("up", "run", "envelope") and (missing := missing_sandbox_extra()):
        console.print(
            f"[red]sandbox {args.sandbox_command}: the sandbox needs {', '.join(missing)}, "
            "which chaos_ext "
            "installs only with its sandbox extra: pip install 'chaos_ext\\[sandbox]'[/]",
            highlight=False,
        )
        return EXIT_INVALID

    if args.sandbox_command not in ("up", "down"):  # run streams the runner's own progress
        return _handle(args, console, print_line)
    with Heartbeat(print_line) as beat:
        return _handle(args, console, beat.say)


def _handle(args: argparse.Namespace, console: Console, say: Callable[[str], None]) -> int:
    try:
        if args.sandbox_command == "up":
            backend, why = backends.choose(args.backend)
            console.print(
                f"[bold]sandbox {escape(args.prefix)}:[/] backend {backend} ({escape(why)})"
            )
            backends.up(backend, args.prefix, args.app_mode, say)
            console.print("[green]sandbox is up[/]; `gameday sandbox status` shows it")
            return EXIT_HELD
        if args.sandbox_command == "run":
            settle = [] if args.settle is None else ["--settle", f"{args.settle:g}"]
            repeat = ["--repeat", str(args.repeat)] if args.repeat != 1 else []
            timeout = args.timeout or 900.0 * max(1, args.repeat)
            extra = [a for v in args.var for a in ("--var", v)]
            extra += [a for f in args.var_file for a in ("--var-file", str(Path(f).resolve()))]
            extra += ["--dry-run"] if args.dry_run else []
            extra += ["--json", str(Path(args.json).resolve())] if args.json else []
            return backends.run_in_sandbox(
                args.prefix,
                ["run", *settle, *repeat, *extra, *args.experiments],
                Path(args.journal_dir).resolve(),
                timeout,
            )
        if args.sandbox_command == "envelope":
            return backends.run_in_sandbox(
                args.prefix, _envelope_argv(args), Path(args.journal_dir).resolve(), args.timeout
            )
        if args.sandbox_command == "down":
            backends.down(args.prefix, say)
            return EXIT_HELD
        report = backends.status(args.prefix)
    except ChaosExtError as exc:
        console.print(
            f"[red]sandbox {args.sandbox_command}: {escape(str(exc))}[/]", highlight=False
        )
        return EXIT_INVALID if "invalid" in type(exc).__name__.lower() else EXIT_FAILED
    if args.json:
        print(json.dumps(report, indent=2))  # noqa: T201 - stdout is the output
    else:
        _print_status(report, args.no_color)
    return EXIT_HELD if report["up"] else EXIT_FAILED


def _print_status(report: dict[str, Any], no_color: bool = False) -> None:
    console = make_console(no_color=no_color)
    if not report["up"]:
        console.print(f"sandbox {report['prefix']!r} is not running", markup=False)
        return
    table = Table(
        title=f"sandbox {report['prefix']} ({report['backend']}, app {report['app_mode']})"
    )
    for column in ("service", "namespace", "address", "pid", "running", "answering"):
        table.add_column(column)
    for name, svc in report["services"].items():
        where = f"{svc['address']}:{svc['port']}" if "address" in svc else ""
        table.add_row(
            name,
            svc.get("netns", ""),
            where,
            str(svc.get("pid", "")),
            "yes" if svc["running"] else "NO",
            {True: "yes", False: "NO", None: "-"}[svc["answering"]],
        )
    console.print(table)
