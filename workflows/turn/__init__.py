"""The turn: the LLM loop, one LLM call, a reply's tool calls, the context bound, the
workspace and the turn's span. Rendering for the model is pure, in
:mod:`~toolnexus_temporal.workflows.rules.render`.

Deterministic; no I/O.
"""
