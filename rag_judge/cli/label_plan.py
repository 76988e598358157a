"""``rag-judge label-plan``: placeholder, being built (issue 33)."""

from __future__ import annotations

import argparse

__all__ = ["add_parser"]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("label-plan", help="(being built)")
    p.set_defaults(handler=lambda args: 2)
