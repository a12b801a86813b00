"""A handle's life: wait, interrupt, close, hooks, and the run loop with continue-as-new.

Deterministic; no I/O.
"""
