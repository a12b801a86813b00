"""Approvals: suspension, Answers, parking on delegated tasks, expiry, escalation and the
audit. The pure Request rules are in :mod:`~toolnexus_temporal.workflows.rules.approvals`; a
parked turn carried across continue-as-new in
:mod:`~toolnexus_temporal.workflows.lifecycle.carry`.

Deterministic; no I/O.
"""
