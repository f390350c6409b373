"""Every ```python block of README.md and docs/*.md, run as it is written against the suite's
broker, so an example in the documentation cannot rot.

Each block is one test, named ``file:line`` (the line of its first statement), and runs as a
script: its own globals, ``__name__`` not ``"__main__"``, tracebacks pointing at the Markdown
file's own lines. What the collector changes, and nothing else:

- the service URLs the examples are written with, ``pulsar://localhost:6650`` and
  ``pulsar://127.0.0.1:6650``, become the test broker's (on a free port), and
  ``http://localhost:8080`` / ``http://127.0.0.1:8080`` its admin URL;
- examples use plain topic names (``my-topic``, ``events``) as a reader would on a fresh broker;
  every topic of ``public/default`` an example creates is deleted after it, so each example starts
  with none of its topics and no example sees another's messages;
- a block that uses Spark finds a SparkSession (local[1], shared by those blocks) already made,
  so its ``SparkSession.builder.getOrCreate()`` returns it instead of starting one per block.

A block that cannot run by itself (configuration for a cluster this machine does not have) is
preceded by ``<!-- no-run: why -->``; it is only compiled (it must be valid Python), not run. A block fails
when it raises; each example checks what it shows with ``assert`` or prints it.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from jvm import local_spark

from magnetar.testing import Standalone

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([^\s`]*)(.*)$")
_NO_RUN = re.compile(r"^<!--\s*no-run:\s*(.*?)\s*-->$")
_URLS = {
    "pulsar://localhost:6650": "service_url",
    "pulsar://127.0.0.1:6650": "service_url",
    "http://localhost:8080": "admin_url",
    "http://127.0.0.1:8080": "admin_url",
}
_USES_SPARK = re.compile(r"\bSparkSession\b|\bspark\.(read|readStream|createDataFrame|dataSource)\b")
_PARTITION = re.compile(r"-partition-\d+$")


@dataclass(frozen=True)
class Example:
    page: str  # relative to the repository
    line: int  # of the first line of code
    code: str
    no_run: str | None  # the reason given with <!-- no-run: ... -->

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def collect(path: Path) -> list[Example]:
    """The ```python blocks of one Markdown file, with their no-run markers."""
    lines = path.read_text(encoding="utf-8").splitlines()
    rel = str(path.relative_to(ROOT))
    found: list[Example] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.group(1), m.group(2), m.group(3).lower()
        start = i + 1
        end = start
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        if lang in ("python", "py"):
            body = [ln[len(indent):] if ln.startswith(indent) else ln for ln in lines[start:end]]
            prev = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
            marker = _NO_RUN.match(prev)
            if prev.startswith("<!--") and "no-run" in prev and not (marker and marker.group(1)):
                raise ValueError(f"{rel}:{i + 1}: a no-run marker must say why: <!-- no-run: reason -->")
            found.append(Example(rel, start + 1, "\n".join(body) + "\n", marker.group(1) if marker else None))
        i = end + 1
    return found


EXAMPLES = [e for page in PAGES for e in collect(page)]


def test_the_documentation_has_examples_and_few_are_not_run() -> None:
    pages = {e.page for e in EXAMPLES}
    assert "README.md" in pages and "docs/getting-started.md" in pages
    not_run = [e for e in EXAMPLES if e.no_run]
    assert len(EXAMPLES) >= 20, len(EXAMPLES)
    assert len(not_run) <= max(3, len(EXAMPLES) // 10), [(e.id, e.no_run) for e in not_run]


@pytest.fixture(scope="module")
def spark_session() -> Iterator[Any]:
    """One local[1] session for the blocks that use Spark, made only if one runs."""
    import magnetar.spark as ms

    session = local_spark(1, "magnetar-doc-examples")
    yield session
    session.stop()
    ms.close_all()


def _topics(broker: Standalone) -> set[str]:
    return {_PARTITION.sub("", t) for t in broker.list_topics("public/default")}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("example", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_example(example: Example, broker: Standalone, request: pytest.FixtureRequest) -> None:
    if example.no_run:
        # Cannot run here (the reason is in the page), but it must still be valid Python.
        compile(example.code, str(ROOT / example.page), "exec", dont_inherit=True)
        return
    code = example.code
    for written, attr in _URLS.items():
        code = code.replace(written, getattr(broker, attr))
    if _USES_SPARK.search(code):
        request.getfixturevalue("spark_session")
    before = _topics(broker)
    # Padded so that line numbers in a traceback are the Markdown file's.
    compiled = compile("\n" * (example.line - 1) + code, str(ROOT / example.page), "exec",
                       dont_inherit=True)  # this file's `from __future__` must not reach examples
    try:
        exec(compiled, {"__name__": "__doc_example__", "__file__": str(ROOT / example.page)})
    finally:
        for topic in sorted(_topics(broker) - before):
            try:
                broker.delete_topic(topic, force=True)
            except Exception as exc:  # the next example would see its messages: say so
                print(f"could not delete {topic}: {exc}", file=sys.stderr)
