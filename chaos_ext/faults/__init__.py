"""The fault ledger as Chaos Toolkit activities (rollback and inspection)."""
