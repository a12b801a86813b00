"""``python -m bench``: run the benchmark suite (see ``bench/README.md``).

python -m bench --size full                 # the README's numbers (~20 min)
python -m bench --size tiny --only ours,floor
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from bench import report
from bench.contenders import ORDER
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
        help=f"comma-separated contenders (default: all of {','.join(ORDER)})",
    )
    parser.add_argument("--stamp", default=None, help="results file stem (default: today)")
    args = parser.parse_args(argv)
    only = [name.strip() for name in args.only.split(",") if name.strip()] or None
    results = asyncio.run(run_suite(args.size, only, args.out, stamp=args.stamp))
    print("\n".join(report.targets_markdown(results)))
    for path in results["files"].values():
        print(path)


if __name__ == "__main__":
    main()
