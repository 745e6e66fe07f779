#!/usr/bin/env python3
"""Check that every number of an old README still appears in the README + docs/ site.

Used when the README's reference text moved into docs/: the numeric tokens (``12``, ``0.0044``,
``1e-10``, ``6.38``) of ``git show REV:README.md`` are compared with those of today's README.md
and docs/*.md, the latter as the site shows them (benchmark tables from bench/results.json,
schemas from the modules, included files expanded; ``tools/docs_hooks.py``).
Usage: ``python tools/check_moved_numbers.py REV`` prints the tokens not found (exit 1 if any).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.docs_hooks import expand  # noqa: E402  (needs the repository root on sys.path)

NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[-+−]?\d+)?")
SNIPPET = re.compile(r'^--8<-- "(?P<path>[^"]+)"$', re.M)


def tokens(text: str) -> set[str]:
    return set(NUMBER.findall(text))


def site_text() -> str:
    parts = [(ROOT / "README.md").read_text()]
    for page in sorted((ROOT / "docs").glob("**/*.md")):
        text = SNIPPET.sub(lambda m: (ROOT / m["path"]).read_text(), page.read_text())
        parts.append(expand(text))
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    old = subprocess.run(["git", "show", f"{argv[0]}:README.md"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    missing = sorted(tokens(old) - tokens(site_text()), key=lambda t: (float(
        t.replace("−", "-")), t))
    print(f"{len(tokens(old))} distinct numbers in the old README, {len(missing)} not found"
          + (": " + ", ".join(missing) if missing else ""))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
