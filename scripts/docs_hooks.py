"""MkDocs hooks (mkdocs.yml): images that pages take from the repository outside docs/.

docs/benchmarks.md shows the chart the benchmark run writes, ``../benches/results/latest/
results.png``, so the chart on GitHub and on the site is the same file and never copied by hand.
MkDocs serves only docs/, so each such image is added to the site under ``repo/<its path>`` and
the page's link pointed there.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

_IMAGE = re.compile(r"(!\[[^\]]*\]\()\.\./([^)\s]+)\)")


def _images(docs_dir: Path) -> set[str]:
    found: set[str] = set()
    for page in docs_dir.glob("*.md"):
        found.update(m.group(2) for m in _IMAGE.finditer(page.read_text(encoding="utf-8")))
    return found


def on_files(files: Files, config: Any, **kwargs: Any) -> Files:
    docs_dir = Path(config["docs_dir"])
    root = docs_dir.parent
    for rel in sorted(_images(docs_dir)):
        source = root / rel
        if source.is_file():
            files.append(File.generated(config, f"repo/{rel}", abs_src_path=str(source)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files, **kwargs: Any) -> str:
    def point(m: re.Match[str]) -> str:
        rel = m.group(2)
        return f"{m.group(1)}repo/{rel})" if files.get_file_from_path(f"repo/{rel}") else m.group(0)

    return _IMAGE.sub(point, markdown)
