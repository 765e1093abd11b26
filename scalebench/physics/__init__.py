"""Lean forward operators (deepinv physics) for problems at sizes deepinv's own cannot reach."""
