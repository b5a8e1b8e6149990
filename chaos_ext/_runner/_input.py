"""Reading an experiment file within limits, whatever the file holds.

A file is read only if it is a regular file (a FIFO, a device or a socket could
block the command or never end) of at most :data:`MAX_BYTES`, in UTF-8 (a BOM
is allowed). It is then parsed with limits that hold whatever the text is:

* nesting at most :data:`MAX_DEPTH` levels (JSON and YAML), so that no parser
  and no later walk of the document runs out of stack;
* YAML aliases (``*name``) expanding to at most :data:`MAX_ALIAS_VALUES` values
  in all: the expansion is counted on the parser's events, before anything is
  built, so a "billion laughs" bomb of a few hundred bytes is refused in
  milliseconds instead of growing to gigabytes in the checks that walk it; an
  alias inside its own anchor (a document that contains itself) is refused too.

Every refusal is an :class:`~chaos_ext.errors.ExperimentInvalid` (one line,
exit 3) that says what the limit is and what to do.
"""

from __future__ import annotations

import codecs
import json
import os
import stat
from pathlib import Path
from typing import Any

import yaml

from chaos_ext.errors import ExperimentInvalid

__all__ = ["MAX_ALIAS_VALUES", "MAX_BYTES", "MAX_DEPTH", "parse_documents", "read_text"]

MAX_BYTES = 4 * 1024 * 1024
"""The largest experiment file read (4 MiB; the shipped experiments are under 20 KiB)."""
MAX_DEPTH = 64
"""The deepest nesting of lists and objects (the shipped experiments nest at most 8 levels)."""
MAX_ALIAS_VALUES = 100_000
"""How many values YAML aliases may add to a file, in all."""

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
_OTHER_ENCODINGS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def _kind_of(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_text(path: Path) -> str:
    """The text of a regular file of at most :data:`MAX_BYTES`, decoded as UTF-8.

    Opened without blocking (a FIFO with no writer would wait forever) and looked at
    before a byte is read: only a regular file is read.
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise ExperimentInvalid(path, "file", exc.strerror or str(exc)) from exc
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise ExperimentInvalid(
                path, "file", "a directory: give the experiment files in it (DIR/*.json)"
            )
        if not stat.S_ISREG(mode):
            raise ExperimentInvalid(
                path,
                "file",
                f"{_kind_of(mode)}, not a regular file: gameday reads experiments from "
                "regular files only (save it to a file first)",
            )
        data = _read_at_most(fd, MAX_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_BYTES:
        raise ExperimentInvalid(
            path, "file", f"larger than {MAX_BYTES // (1024 * 1024)} MiB: not an experiment file"
        )
    return _decoded(path, data)


def _read_at_most(fd: int, size: int) -> bytes:
    chunks: list[bytes] = []
    left = size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _decoded(path: Path, data: bytes) -> str:
    for bom, name in _OTHER_ENCODINGS:
        if data.startswith(bom):
            raise ExperimentInvalid(
                path, "encoding", f"{name} text; save the file as UTF-8 (iconv -t UTF-8)"
            )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ExperimentInvalid(
            path,
            "encoding",
            f"not UTF-8: byte 0x{data[exc.start]:02x} on line {line} (offset {exc.start}) "
            "is not valid UTF-8; save the file as UTF-8 (iconv -f LATIN1 -t UTF-8)",
        ) from None


def parse_documents(path: Path, text: str, *, as_yaml: bool) -> list[Any]:
    """The documents of the file (JSON: one; YAML: every non-empty document), within limits."""
    if as_yaml:
        _check_yaml_events(path, text)  # the limits, before anything is built
        documents = [d for d in yaml.load_all(text, Loader=_LOADER) if d is not None]
    else:
        try:
            documents = [json.loads(text)]
        except RecursionError:
            raise _too_deep(path, "file") from None
    for document in documents:
        _check_depth(path, document)
    return documents


def _too_deep(path: Path, where: str) -> ExperimentInvalid:
    return ExperimentInvalid(
        path,
        where,
        f"nested deeper than {MAX_DEPTH} levels of lists and objects: not an experiment",
    )


def _check_depth(path: Path, document: Any) -> None:
    """Nesting at most MAX_DEPTH (JSON's parser goes deeper; YAML's events were checked)."""
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > MAX_DEPTH:
            raise _too_deep(path, "file")
        stack.extend((child, depth + 1) for child in children)


class _Collection:
    """An open YAML collection while its events are counted."""

    __slots__ = ("anchor", "values")

    def __init__(self, anchor: str | None) -> None:
        self.anchor = anchor
        self.values = 1


class _EventCount:
    """Depth and alias expansion of a YAML stream, one parser event at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sizes: dict[str, int] = {}  # anchor -> values it stands for, aliases expanded
        self.open: list[_Collection] = []
        self.added = 0  # values added by aliases, in all

    def _count(self, values: int) -> None:
        if self.open:
            self.open[-1].values += values

    def document(self, event: Any) -> None:
        self.sizes.clear()  # anchors belong to their document

    def start(self, event: Any) -> None:
        self.open.append(_Collection(event.anchor))
        if len(self.open) > MAX_DEPTH:
            raise _too_deep(self.path, _line(event))

    def end(self, event: Any) -> None:
        done = self.open.pop()
        if done.anchor is not None:
            self.sizes[done.anchor] = done.values
        self._count(done.values)

    def scalar(self, event: Any) -> None:
        if event.anchor is not None:
            self.sizes[event.anchor] = 1
        self._count(1)

    def alias(self, event: Any) -> None:
        if any(c.anchor == event.anchor for c in self.open):
            raise ExperimentInvalid(
                self.path, _line(event), f"YAML alias *{event.anchor} is inside its own anchor"
            )
        size = self.sizes.get(str(event.anchor), 1)  # an unknown one: the loader names it
        self.added += size
        if self.added > MAX_ALIAS_VALUES:
            raise ExperimentInvalid(
                self.path,
                _line(event),
                f"YAML aliases expand to more than {MAX_ALIAS_VALUES:,} values "
                "(an alias bomb?); write the values out, or use fewer aliases",
            )
        self._count(size)


def _line(event: Any) -> str:
    return f"line {event.start_mark.line + 1}"


_HANDLERS: tuple[tuple[type[yaml.Event], Any], ...] = (
    (yaml.DocumentStartEvent, _EventCount.document),
    (yaml.CollectionStartEvent, _EventCount.start),
    (yaml.CollectionEndEvent, _EventCount.end),
    (yaml.ScalarEvent, _EventCount.scalar),
    (yaml.AliasEvent, _EventCount.alias),
)


def _check_yaml_events(path: Path, text: str) -> None:
    """Depth and alias expansion, counted on the parser's events (nothing is built)."""
    count = _EventCount(path)
    for event in yaml.parse(text, Loader=_LOADER):
        for kind, handle in _HANDLERS:
            if isinstance(event, kind):
                handle(count, event)
                break
