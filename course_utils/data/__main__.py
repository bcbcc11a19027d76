"""``python -m course_utils.data [list | fetch NAME... | where]``: prepare the data folder from a terminal (before a
classroom without Wi-Fi: fetch everything once, then set ``COURSE_OFFLINE=1``)."""

from __future__ import annotations

import argparse
import sys

from .download import ChecksumMismatch, DataUnavailable, fetch
from .registry import REGISTRY, data_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m course_utils.data", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("list", help="list the datasets and whether each is present and intact")
    sub.add_parser("where", help="print the data folder")
    sub.add_parser("fetch", help="download datasets into the data folder").add_argument(
        "names", nargs="+", choices=sorted(REGISTRY))
    args = parser.parse_args(argv)
    if args.command == "where":
        print(data_dir())
    elif args.command == "fetch":
        for name in args.names:
            try:
                print(f"{name}: {fetch(name)}")
            except (DataUnavailable, ChecksumMismatch) as exc:
                print(f"{name}: {exc}", file=sys.stderr)
                return 1
    else:
        print(f"data folder: {data_dir()}")
        for name, res in REGISTRY.items():
            try:
                fetch(name, download=False, progress=False)
                status = "ok"
            except DataUnavailable:
                status = "missing"
            except ChecksumMismatch:
                status = "CORRUPT (delete it and fetch again)"
            print(f"  {name:<17} {status:<8} {res.path}  ({res.size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
