"""The contenders, by name, in table order."""

from __future__ import annotations

from bench.contender import Contender
from bench.floor import Floor
from bench.ours import Ours, OursDirect
from bench.peer import Peer
from bench.toolnexus_ref import Toolnexus

ORDER = ["floor", "ours", "ours_direct", "toolnexus", "openai_agents"]


def make(name: str) -> Contender:
    """A fresh contender by name."""
    classes: dict[str, type[Contender]] = {
        "floor": Floor,
        "ours": Ours,
        "ours_direct": OursDirect,
        "toolnexus": Toolnexus,
        "openai_agents": Peer,
    }
    if name not in classes:
        raise KeyError(f"unknown contender {name!r} (known: {', '.join(ORDER)})")
    return classes[name]()
