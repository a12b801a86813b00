"""Deterministic workflow code: the Handle state machine, one concept per module.

Nothing here performs I/O; the Temporal sandbox re-imports these modules. Importing this
package loads nothing else: import what you need from its modules (``names``, ``models``,
``state``, ``messages`` for the durable surface; ``agent`` for ``AgentWorkflow``).
"""
