"""Deterministic workflow code: the Handle state machine, grouped by concept.

Nothing here performs I/O; the Temporal sandbox re-imports these modules. Importing this
package loads nothing else: import what you need from its modules. ``agent`` holds
``AgentWorkflow`` (the composition root); ``contract/`` the durable surface (names, versions,
models, messages, state); ``approvals/``, ``children/``, ``turn/``, ``lifecycle/`` and
``visibility/`` one concept each; ``machine``, ``inbox``, ``budgets``, ``leases``, ``outbox``
and ``trust`` are one module each. The docs' "Where each rule lives" page maps every rule to
its module.
"""
