"""The gameday runner: runs Chaos Toolkit experiments through chaostoolkit-lib
with rollbacks on every exit path and the fault ledger swept behind them."""
