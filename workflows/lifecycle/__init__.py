"""A handle's life: wait, interrupt, close, hooks, and the run loop with continue-as-new,
a parked turn carried into the next run (``carry``) included.

Deterministic; no I/O.
"""
