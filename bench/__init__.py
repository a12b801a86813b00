"""Benchmarks of toolnexus-temporal against a minimal Temporal floor, the in-process
``toolnexus`` package and the openai-agents Temporal integration. Run ``python -m bench``;
see ``bench/README.md``.

Kept import-light on purpose: the floor's workflows are imported inside Temporal's sandbox.
"""
