"""MkDocs hooks (``hooks:`` in mkdocs.yml): figures and schemas come from their sources.

Each marker stands alone on its line.

- ``<!-- bench:TABLE -->`` or ``<!-- bench:TABLE SUITE,SUITE -->`` becomes the Markdown table of
  :func:`bench.report.table` over bench/results.json, so the figures on the site are the last
  ``make bench`` run's.
- ``<!-- schema:path/to/module.py -->`` (or ``...py#2`` for the second block) becomes the
  ``::`` literal block of that module's docstring (the YAML schemas of model and scenario
  files live there, beside the code that validates them), so the documented keys are the
  validated ones.

An unknown table, suite, file or block stops the build.
"""

from __future__ import annotations

import ast
import re
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import report  # noqa: E402  (needs the repository root on sys.path)

# A marker stands alone on its line (so that a page can quote one inside backticks).
MARKER = re.compile(r"^<!--\s*bench:(?P<table>\w+)(?:\s+(?P<suites>[\w,]+))?\s*-->$", re.M)
SCHEMA = re.compile(r"^<!--\s*schema:(?P<path>[\w/.]+\.py)(?:#(?P<n>\d+))?\s*-->$", re.M)


def literal_blocks(path: Path) -> list[str]:
    """The ``::`` literal blocks of the module docstring of ``path``, dedented."""
    doc = ast.get_docstring(ast.parse(path.read_text(), str(path))) or ""
    blocks, lines = [], doc.splitlines()
    for i, line in enumerate(lines):
        if not line.rstrip().endswith("::"):
            continue
        body = []
        for nxt in lines[i + 1:]:
            if nxt.strip() and not nxt.startswith((" ", "\t")):
                break
            body.append(nxt)
        blocks.append(textwrap.dedent("\n".join(body)).strip("\n"))
    return blocks


def schema(path: str, n: int = 1) -> str:
    """Block ``n`` (1-based) of :func:`literal_blocks` of ``path`` as a fenced YAML block."""
    file = ROOT / path
    if not file.is_file():
        raise report.ReportError(f"schema marker: no file {path}")
    blocks = literal_blocks(file)
    if not 1 <= n <= len(blocks):
        raise report.ReportError(f"schema marker: {path} has {len(blocks)} literal block(s), "
                                 f"not a block {n}")
    return f"```yaml\n{blocks[n - 1]}\n```"


def expand(markdown: str, results: dict | None = None) -> str:
    """``markdown`` with every benchmark and schema marker replaced by its content."""
    markdown = SCHEMA.sub(lambda m: schema(m["path"], int(m["n"] or 1)), markdown)
    if not MARKER.search(markdown):
        return markdown
    results = report.load() if results is None else results

    def table(match: re.Match) -> str:
        suites = match["suites"].split(",") if match["suites"] else None
        return report.table(results, match["table"], suites)

    return MARKER.sub(table, markdown)


def on_page_markdown(markdown: str, page, config, files) -> str:  # noqa: ARG001 (MkDocs API)
    from mkdocs.exceptions import PluginError  # only under MkDocs

    try:
        return expand(markdown)
    except report.ReportError as exc:
        raise PluginError(f"{page.file.src_path}: {exc}") from None
