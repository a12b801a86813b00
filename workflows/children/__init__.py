"""Children: spawn, reports, agent definitions, children whose workflows end, background
children and the ``task`` tool. The roster's pure rules are in
:mod:`~toolnexus_temporal.workflows.rules.roster`.

Deterministic; no I/O.
"""
