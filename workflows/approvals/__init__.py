"""Approvals: suspension, Answers, parking on delegated tasks, and a parked turn carried across
continue-as-new.

Deterministic; no I/O.
"""
