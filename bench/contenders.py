"""The contenders, by name, in table order."""

from __future__ import annotations

from bench.actant_peer import Actant
from bench.contender import Contender
from bench.floor import Floor
from bench.ours import Ours, OursDirect, OursPostgres
from bench.peer import Peer
from bench.toolnexus_ref import Toolnexus

ORDER = ["floor", "ours", "ours_pg", "ours_direct", "toolnexus", "openai_agents", "actant"]

DEFAULT = [name for name in ORDER if name != "ours_pg"]
"""The contenders run when none are named (``ours_pg`` runs with ``--store both``)."""


def make(name: str) -> Contender:
    """A fresh contender by name."""
    classes: dict[str, type[Contender]] = {
        "floor": Floor,
        "ours": Ours,
        "ours_direct": OursDirect,
        "ours_pg": OursPostgres,
        "toolnexus": Toolnexus,
        "openai_agents": Peer,
        "actant": Actant,
    }
    if name not in classes:
        raise KeyError(f"unknown contender {name!r} (known: {', '.join(ORDER)})")
    return classes[name]()
