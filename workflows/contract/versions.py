"""Versions of the wire protocol, and the rule for changing workflow behaviour.

**Until 1.0** there is one wire protocol,
:data:`~toolnexus_temporal.workflows.contract.names.PROTOCOL`. A behaviour change that alters
workflow commands re-records the committed histories it changes (``TNX_RECORD_HISTORIES=1
pytest tests/test_record_histories.py``) instead of adding a gate; the replay tests still catch
code that does not replay its own histories.

**From 1.0 on** every such change goes behind a gate, one of two kinds:

* a protocol generation, for a change between workflows (a message, a field two handles must
  agree on): add the number to ``names.PROTOCOLS``, branch with :func:`at_least`, and let the
  client start new trees on it (children inherit their parent's generation);
* a ``workflow.patched`` id, for a change inside one workflow: add it to ``names.PATCHES``
  with what it changed and when, and branch with :func:`patched`.

**Retirement rule.** A generation or a patch id is removed (with its old branch) only once no
running agent uses it: ``tnx replay-check`` lists, per namespace, the generations and patch ids
the running agents use, and refuses (exit 1) the agents whose generation this build no longer
has. A removed generation moves to ``names.RETIRED_PROTOCOLS``, a removed patch id to
``names.RETIRED_PATCHES`` (neither is ever reused). Model: temporalio/samples-python
``patching/`` (patched, deprecated, removed).

Deterministic and I/O free (the workflow sandbox imports it).
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.names import (
        PATCHES,
        PROTOCOL,
        PROTOCOLS,
        RETIRED_PATCHES,
        RETIRED_PROTOCOLS,
        UNSUPPORTED_PROTOCOL,
    )


def protocol_error(protocol: int) -> str | None:
    """Why this build cannot run a handle of generation ``protocol``, or None when it can."""
    if protocol in PROTOCOLS:
        return None
    if protocol in RETIRED_PROTOCOLS:
        return (
            f"protocol {protocol} ({RETIRED_PROTOCOLS[protocol]}) is retired: this build runs "
            f"protocol {PROTOCOL}; drain or terminate the agents of the older build"
        )
    return f"protocol {protocol} is unknown to this build (it runs protocol {PROTOCOL})"


def check_protocol(protocol: int) -> None:
    """Refuse a handle whose generation this build does not run.

    Raises:
        ApplicationError: type :data:`UNSUPPORTED_PROTOCOL`, non-retryable (raised from the
            workflow's run, it fails the workflow with this message, never a task retry).
    """
    error = protocol_error(protocol)
    if error is not None:
        raise ApplicationError(error, type=UNSUPPORTED_PROTOCOL, non_retryable=True)


def at_least(protocol: int, generation: int) -> bool:
    """Whether a handle of generation ``protocol`` has the behaviour of ``generation`` (a
    gate from 1.0 on: ``if at_least(s.protocol, 5): new rule``).

    Raises:
        ValueError: ``generation`` is not a generation this build has (a gate on a retired
            or unknown generation is a bug).
    """
    if generation not in PROTOCOLS:
        raise ValueError(f"protocol {generation} is not one of this build's {sorted(PROTOCOLS)}")
    return protocol >= generation


def patched(patch_id: str) -> bool:
    """``workflow.patched(patch_id)`` for an id listed in ``names.PATCHES``.

    Raises:
        ValueError: the id is not listed (or is retired): every patch id has one home.
    """
    if patch_id in RETIRED_PATCHES:
        raise ValueError(f"patch id {patch_id!r} is retired and must not be used again")
    if patch_id not in PATCHES:
        raise ValueError(f"patch id {patch_id!r} is not listed in names.PATCHES")
    return workflow.patched(patch_id)
