"""Storage of the fault ledger: the SQLite file, its event log, its marker and their checks.

The public API is :mod:`chaos_ext.ledger`; this package is how it is kept:

* :mod:`.entry` - one entry, and whether its owner process still runs;
* :mod:`.events` - the append-only event log beside the database;
* :mod:`.store` - the SQLite database;
* :mod:`.marker` - the marker kept outside the ledger's folder;
* :mod:`.machine` - which machine (and boot) an entry was recorded on;
* :mod:`.check` - the full check that reconciles all three, and the repair.
"""
