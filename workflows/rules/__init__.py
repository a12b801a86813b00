"""Pure rules over the handle's state, one module per concept: which Request a handle surfaces
and where an Answer goes (``approvals``), the roster of children (``roster``), the turn's
input as the model reads it (``render``). The floor just above ``contract/``: these modules
import only ``contract/``, so every component above may use them.

Deterministic; no I/O.
"""
