"""Stop conditions and the Chaos Toolkit controls shipped with chaos_ext.

* :mod:`.stop_conditions`: the one public entry to stop conditions (abort
  plans, the Prometheus/alert watch, its run-event handler), used by the CLI,
  the runner and the control;
* :mod:`.abort` and :mod:`.ledger_sweep`: controls for plain ``chaos run`` too.
"""
