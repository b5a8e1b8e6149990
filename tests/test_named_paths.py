"""Every ``experiments/...`` path a newcomer is shown exists (issue 48, item 6).

The README, CONTRIBUTING.md, every guide under ``docs/``, ``deploy/README.md``
and every ``gameday ... --help`` text are read as a newcomer reads them: each
``experiments/...`` path named there must be a file or folder of this checkout
(a glob such as ``experiments/*.json`` must match at least one file), so an
example pasted from them names a file that is there.
"""

from __future__ import annotations

import argparse
import re

from support.harness import ROOT

from chaos_ext.cli.main import build_parser

PATH = re.compile(r"(?<![\w/])experiments/[\w./*-]*")
# a path that a rich table in a transcript wrapped at a cell's edge ("│ ...dns-search- │")
WRAPPED = re.compile(r"^│.*?(experiments/[\w./*-]*-)(?= *│| *$)", re.MULTILINE)


def _help_texts(
    prefix: str = "gameday", parser: argparse.ArgumentParser | None = None
) -> dict[str, str]:
    """``gameday --help`` and every (sub)command's ``--help``, as argparse prints them."""
    parser = parser or build_parser()
    texts = {f"{prefix} --help": parser.format_help()}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                texts.update(_help_texts(f"{prefix} {name}", sub))
    return texts


def _documents() -> dict[str, str]:
    files = [
        ROOT / "README.md",
        ROOT / "CONTRIBUTING.md",
        ROOT / "deploy" / "README.md",
        *sorted((ROOT / "docs").rglob("*.md")),
    ]
    return {str(f.relative_to(ROOT)): f.read_text() for f in files}


def named_paths(text: str) -> set[str]:
    """The ``experiments/...`` paths ``text`` names, trailing punctuation left off."""
    wrapped = set(WRAPPED.findall(text))
    return {m.rstrip(".,:;") for m in PATH.findall(text) if m not in wrapped}


def _exists(path: str) -> bool:
    if "*" in path:
        return any(ROOT.glob(path))
    return (ROOT / path).exists()


def test_every_experiments_path_named_for_a_newcomer_exists() -> None:
    sources = {**_documents(), **_help_texts()}
    missing = {
        where: sorted(p for p in named_paths(text) if not _exists(p))
        for where, text in sources.items()
    }
    missing = {where: paths for where, paths in missing.items() if paths}
    assert missing == {}
    assert sum(len(named_paths(t)) for t in sources.values()) > 50  # the check reads them


def test_the_check_notices_a_path_that_is_not_there() -> None:
    text = "gameday run experiments/sandbox/db-latency.json, or experiments/*.json."
    assert named_paths(text) == {"experiments/sandbox/db-latency.json", "experiments/*.json"}
    assert not _exists("experiments/sandbox/db-latency.json")
    assert _exists("experiments/*.json") and _exists("experiments/sandbox/01-db-latency.json")
    cell = "│ gameday run experiments/dns-search-   │\n│ amplification.json │"
    assert named_paths(cell) == set()  # a transcript's table cell, wrapped: not a path
