"""What the outside sees: trace, search attributes, views, and the operator's view in the web
UI.

Deterministic; no I/O.
"""
