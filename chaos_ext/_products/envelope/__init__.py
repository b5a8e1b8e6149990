"""The resilience envelope: the search over a fault's magnitude, its runs, and their report.

* :mod:`.spec` - the envelope settings of an experiment and the magnitude applied to it;
* :mod:`.search` - the search itself (pure): steps, conclusions and every sentence it prints;
* :mod:`.run` - the runs, through the runner;
* :mod:`.document` - the envelope document written beside the journals;
* :mod:`.view`, :mod:`.chart`, :mod:`.render` - the typed view, its chart and its report pages;
* :mod:`.sandbox_check` - the sandbox's check of an envelope's conclusion.
"""
