"""Children: spawn, reports, agent definitions, the roster, children whose workflows end, and
the ``task`` tool.

Deterministic; no I/O.
"""
