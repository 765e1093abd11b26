"""Measurement scripts: each runs from the repository root as `python -m tools.NAME`
(tools/measuring.py holds what they share)."""
