"""The turn: the LLM loop, one LLM call, a reply's tool calls, and rendering for the model.

Deterministic; no I/O.
"""
