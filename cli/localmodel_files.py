"""Where the local model server's files are: the ``llama-server`` binary and the GGUF model,
in the cache folder ``scripts/build-llama-server.sh`` fills (``$TNX_CACHE``, default
``~/.cache/toolnexus-temporal``) or named by an environment variable.

:func:`cache_dir`, :func:`find_llama_server`, :func:`find_model` and their environment
variables; :mod:`~toolnexus_temporal.cli.localmodel` runs the server (and re-exports these).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

CACHE_ENV: Final = "TNX_CACHE"
"""Environment variable naming the cache root (default ``~/.cache/toolnexus-temporal``)."""

SERVER_ENV: Final = "TNX_LLAMA_SERVER"
"""Environment variable naming a ``llama-server`` binary to use instead of the cached one."""

MODEL_ENV: Final = "TNX_LOCAL_MODEL"
"""Environment variable naming a ``.gguf`` model to use instead of the cached one."""

MODEL_GLOB: Final = "SmolLM2-135M-Instruct*.gguf"
"""File name pattern of the cached model inside ``{cache}/models``."""


def cache_dir() -> Path:
    """The cache root shared with ``scripts/build-llama-server.sh``.

    Returns:
        ``$TNX_CACHE`` when set and non-empty, else ``~/.cache/toolnexus-temporal``.
    """
    root = os.environ.get(CACHE_ENV, "")
    if root:
        return Path(root).expanduser()
    return Path.home() / ".cache" / "toolnexus-temporal"


def is_executable(path: Path) -> bool:
    """Whether ``path`` is an executable file."""
    return path.is_file() and os.access(path, os.X_OK)


def find_llama_server() -> Path | None:
    """Locate the ``llama-server`` binary.

    ``$TNX_LLAMA_SERVER``, when set, is the only candidate (an override that points
    nowhere gives None rather than silently falling back); otherwise the binary built
    by ``scripts/build-llama-server.sh`` at ``{cache}/llama-server/bin/llama-server``.

    Returns:
        Absolute path of an executable ``llama-server``, or None when there is none.
    """
    override = os.environ.get(SERVER_ENV, "")
    if override:
        path = Path(override).expanduser().absolute()
        return path if is_executable(path) else None
    path = cache_dir() / "llama-server" / "bin" / "llama-server"
    return path.absolute() if is_executable(path) else None


def find_model() -> Path | None:
    """Locate the GGUF model file.

    ``$TNX_LOCAL_MODEL``, when set, is the only candidate; otherwise the first (by
    name) non-empty ``SmolLM2-135M-Instruct*.gguf`` in ``{cache}/models``.

    Returns:
        Absolute path of the model file, or None when there is none.
    """
    override = os.environ.get(MODEL_ENV, "")
    if override:
        path = Path(override).expanduser().absolute()
        return path if path.is_file() else None
    models = cache_dir() / "models"
    for path in sorted(models.glob(MODEL_GLOB)):
        if path.is_file() and path.stat().st_size > 0:
            return path.absolute()
    return None
