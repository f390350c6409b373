"""The documentation site, built by the test command: ``scripts/dev docs`` (``mkdocs build
--strict``) succeeds, and its API reference shows every public class of ``magnetar`` and
``magnetar.admin`` and, under each documented call, every option that call declares.

The options are read from the installed package at run time (the ``Options`` section that
``@documented`` and ``option_docs`` write into the docstrings), the page from the built HTML, so a
declaration the site's griffe extension cannot find, or a class left out of docs/reference.md,
fails here and not only on a reader's screen.
"""

from __future__ import annotations

import html
import inspect
import re
import subprocess
from pathlib import Path

import pytest

import magnetar
import magnetar.admin

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.timeout(1200)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> str:
    site = tmp_path_factory.mktemp("site")
    # the same command a writer runs; the later --site-dir keeps the tree's site/ untouched
    done = subprocess.run(["bash", str(ROOT / "scripts" / "dev"), "docs", "--site-dir", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=1100)
    assert done.returncode == 0, f"the strict site build failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    return (site / "reference" / "index.html").read_text(encoding="utf-8")


def _public_classes() -> list[tuple[str, type]]:
    found = []
    for module in (magnetar, magnetar.admin):
        for name in module.__all__:
            obj = getattr(module, name)
            if inspect.isclass(obj):
                found.append((f"{module.__name__}.{name}", obj))
    return found


_ANCHOR = re.compile(r'id="(magnetar[\w.]*)"')


def _sections(page: str) -> dict[str, str]:
    """Each documented object's part of the page, by its anchor, up to the next object's."""
    marks = [(m.group(1), m.start()) for m in _ANCHOR.finditer(page)]
    return {name: page[start:end] for (name, start), (_, end) in zip(marks, marks[1:] + [("", len(page))])}


def _options_in(doc: str | None) -> list[str]:
    """The option names of an ``Options (keyword arguments):`` docstring section."""
    if not doc or "Options (keyword arguments):" not in doc:
        return []
    section = doc.split("Options (keyword arguments):", 1)[1]
    return re.findall(r"^\s{4}(\w+): ", section, flags=re.M)


def test_the_reference_shows_every_public_class(reference: str) -> None:
    anchors = set(_ANCHOR.findall(reference))
    missing = []
    for dotted, cls in _public_classes():
        # the exceptions are shown as the members of magnetar.exceptions, where they are defined
        shown_as = {dotted, f"{cls.__module__}.{cls.__name__}"}
        if not shown_as & anchors:
            missing.append(dotted)
    assert not missing, f"docs/reference.md does not show: {missing}"


def test_the_reference_shows_every_declared_option_under_its_call(reference: str) -> None:
    sections = _sections(reference)
    calls = 0
    missing = []
    for dotted, cls in _public_classes():
        members = [("", cls)] + [(f".{n}", m) for n, m in vars(cls).items() if not n.startswith("_")]
        for suffix, member in members:
            options = _options_in(getattr(member, "__doc__", None))
            if not options:
                continue
            calls += 1
            anchor = dotted + suffix
            text = html.unescape(sections.get(anchor, ""))
            absent = [o for o in options if f"<code>{o}</code>" not in text]
            if anchor not in sections or absent:
                missing.append(f"{anchor}: {absent or 'not on the page'}")
    # Client and AsyncClient (and their create_producer, subscribe, create_reader,
    # create_table_view, ...) carry option tables: none found means the parse above is wrong
    assert calls >= 10, f"only {calls} calls with options found"
    assert not missing, "options missing from the reference:\n" + "\n".join(missing)
