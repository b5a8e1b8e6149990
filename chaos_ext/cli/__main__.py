"""``python -m chaos_ext.cli``: the ``gameday`` command (:mod:`chaos_ext.cli.entry`)."""

from __future__ import annotations

import sys

from chaos_ext.cli.entry import main

if __name__ == "__main__":
    sys.exit(main())
