"""``python -m visionzoo list``: what this installation offers (models, cards, tasks, datasets)."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m visionzoo", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    ls = sub.add_parser("list", help="list architectures, published models, tasks and datasets")
    ls.add_argument("pattern", nargs="?", default="*", help="shell pattern for model names, e.g. 'ram*'")
    args = p.parse_args(argv)
    if args.cmd == "list":
        from . import list_models, list_pretrained
        from .data import list_datasets
        from .engine import list_tasks
        print("architectures:", ", ".join(list_models(args.pattern)) or "-")
        print("published models:", ", ".join(list_pretrained(args.pattern)) or "-")
        print("tasks (train.py / eval.py):", ", ".join(list_tasks()))
        print("datasets:", ", ".join(list_datasets()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
