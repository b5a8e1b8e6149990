"""The context-manager half every test/sandbox server shares: leaving the block stops it."""

from __future__ import annotations

from typing import Self

__all__ = ["Stoppable"]


class Stoppable:
    """Mixin: ``with Server.start(...) as server:`` stops the server however the block ends."""

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
