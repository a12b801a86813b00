"""The durable surface: names, protocol versions, the contract's models, messages and the
handle's state.

Deterministic; no I/O.
"""
