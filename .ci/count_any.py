"""Counts ``Any`` per package of infmon and fails when a count grows (a guard of .ci/guards).

Every use of the name ``Any`` in code (a NAME token: annotations, casts, ``typing.Any``) is
counted; its ``import`` lines are not. The counts are compared with ``.ci/any_baseline.json``:
a package above its baseline fails the guard; below it, the baseline is lowered in place (commit
it), so the count only goes down. A package not in the baseline has a baseline of 0.

Usage: python .ci/count_any.py [--baseline FILE] [--root DIR]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tokenize
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent


def package_of(path: Path, root: Path) -> str:
    """``infmon.model`` for infmon/model/…; ``infmon`` for a module at the top."""
    parts = path.relative_to(root.parent).parts
    return ".".join(parts[:2]) if len(parts) > 2 else parts[0]


def count_in(source: str) -> int:
    """NAME tokens ``Any`` outside ``import`` statements."""
    n, at_start, in_import = 0, True, False
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.NEWLINE:
            at_start, in_import = True, False
        elif tok.type == tokenize.NAME:
            if at_start:
                in_import = tok.string in ("import", "from")
            n += tok.string == "Any" and not in_import
            at_start = False
        elif tok.type not in (tokenize.INDENT, tokenize.DEDENT, tokenize.NL, tokenize.COMMENT):
            at_start = False
    return n


def counts(root: Path) -> Counter[str]:
    out: Counter[str] = Counter()
    for path in sorted(root.rglob("*.py")):
        out[package_of(path, root)] += count_in(path.read_text(encoding="utf-8"))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, default=HERE / "any_baseline.json")
    parser.add_argument("--root", type=Path, default=HERE.parent / "infmon")
    args = parser.parse_args()
    now = counts(args.root)
    base: dict[str, int] = json.loads(args.baseline.read_text()) if args.baseline.exists() else {}
    grown = {p: (base.get(p, 0), n) for p, n in sorted(now.items()) if n > base.get(p, 0)}
    for pkg, (was, n) in grown.items():
        print(f"{pkg}: {n} Any, baseline {was}: type what you added (or lower another first)")
    if grown:
        return 1
    lowered = {p: n for p, n in now.items() if n < base.get(p, 0)}
    gone = [p for p in base if p not in now]
    if lowered or gone:
        new = {p: n for p, n in sorted(now.items()) if n}
        args.baseline.write_text(json.dumps(new, indent=2) + "\n")
        said = ", ".join(f"{p} {base[p]} → {n}" for p, n in sorted(lowered.items()))
        print(f"Any lowered ({said or 'packages gone'}): {args.baseline} updated, commit it")
    total = sum(now.values())
    print(f"Any: {total} uses in {len([p for p in now if now[p]])} packages, none grew")
    return 0


if __name__ == "__main__":
    sys.exit(main())
