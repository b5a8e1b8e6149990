"""Chaos Toolkit controls shipped with chaos_ext (for use under ``chaos run`` too)."""
