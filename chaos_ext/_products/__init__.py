"""What gameday makes from runs: reports (:mod:`.report`), envelopes (:mod:`.envelope`),
schedules (:mod:`.schedule`) and the local sandbox (:mod:`.sandbox`).

Above the runner, below the CLI.
"""
