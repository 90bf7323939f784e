"""`infmon demo`."""

from __future__ import annotations

import argparse

from infmon.commands import not_built_yet


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    return not_built_yet("demo")
