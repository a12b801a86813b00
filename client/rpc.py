"""Connecting to Temporal, and the typed calls the host library makes to handle workflows."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter


async def connect(address: str, namespace: str = "default") -> Client:
    """Connect a client with the pydantic data converter every part of the runtime uses.

    Args:
        address: the frontend's ``host:port``, e.g. ``localhost:7233``.
        namespace: the Temporal namespace.

    Raises:
        RuntimeError: the server cannot be reached (from ``Client.connect``).
    """
    return await Client.connect(
        address, namespace=namespace, data_converter=pydantic_data_converter
    )
