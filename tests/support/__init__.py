"""Test-only helpers and a tiny Chaos Toolkit extension that uses the public ledger API."""
