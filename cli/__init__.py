"""The ``tnx`` command line and the apps around the host library.

``app`` (the typer application; ``server`` is its ``tnx server`` group), ``ops`` (running one
host verb with readable errors and exit codes), ``render`` (tables), ``demo`` (``tnx demo``),
``devserver`` and ``localmodel`` (the embedded Temporal dev server and a local llama-server)
and ``procs`` (the background-process helper both of them use).

Unlike :mod:`toolnexus_temporal.client`, this package may import everything: the worker,
the activities, typer and rich.
"""
