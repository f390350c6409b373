"""A griffe extension for the API reference (mkdocs.yml): the docstrings magnetar completes at
import time, completed the same way from the source, so the site needs no compiled extension.

At import, ``@documented(ProducerOptions)`` appends the declared options of a method to its
docstring, ``ClientHandle.__doc__ = f"...{option_docs(ClientOptions)}"`` does the same for the
client, and the public classes take their handle's docstring (``__doc__ = ClientHandle.__doc__``).
griffe reads the source without running it; this extension reads the same declarations in
``magnetar/_options.py`` (``name: Annotated[type, Opt(default, doc, unit, aliases)]`` in
``TypedDict`` classes, and the few declared beside the one feature they configure, such as
``TableViewOptions`` in ``magnetar/_table_view.py``) and writes them as a table: option, default,
meaning.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import griffe


def _literal(node: ast.expr) -> str:
    """The default as Python would print it: constant arithmetic evaluated, names as written."""
    try:
        return repr(eval(compile(ast.Expression(node), "<default>", "eval"), {"__builtins__": {}}, {}))
    except Exception:
        return ast.unparse(node)


class _Declarations:
    """The option declarations of the package's modules, by class name, bases first."""

    def __init__(self, sources: dict[str, str]) -> None:
        self.classes: dict[str, ast.ClassDef] = {}
        self.where: dict[str, str] = {}
        for path, source in sources.items():
            for node in ast.parse(source).body:
                if isinstance(node, ast.ClassDef) and node.name.endswith("Options"):
                    if node.name in self.where:
                        raise KeyError(f"option declaration {node.name} in both {self.where[node.name]} and {path}")
                    self.classes[node.name], self.where[node.name] = node, path
        # the bases they name (ConnectionOptions(ClusterOptions)) are looked up the same way
        for path, source in sources.items():
            for node in ast.parse(source).body:
                if isinstance(node, ast.ClassDef) and node.name not in self.classes:
                    self.classes.setdefault(node.name, node)

    def options(self, name: str) -> list[tuple[str, str, str, str | None]]:
        cls = self.classes.get(name)
        if cls is None:
            raise KeyError(f"no option declaration {name} in the modules of magnetar")
        found: list[tuple[str, str, str, str | None]] = []
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id in self.classes:
                found += self.options(base.id)
        for item in cls.body:
            if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
                continue
            ann = item.annotation
            if not (isinstance(ann, ast.Subscript) and isinstance(ann.slice, ast.Tuple)):
                continue
            opt = ann.slice.elts[-1]
            if not (isinstance(opt, ast.Call) and isinstance(opt.func, ast.Name) and opt.func.id == "Opt"):
                continue
            args = list(opt.args)
            default = _literal(args[0])
            doc = args[1].value if len(args) > 1 and isinstance(args[1], ast.Constant) else ""
            unit = args[2].value if len(args) > 2 and isinstance(args[2], ast.Constant) else None
            found.append((item.target.id, default, str(doc), unit))
        return found

    def table(self, *names: str) -> str:
        rows = ["**Options** (keyword arguments):", "", "| option | default | meaning |", "|---|---|---|"]
        for name in names:
            for option, default, doc, unit in self.options(name):
                unit_text = " (seconds)" if unit == "s" else " (bytes)" if unit == "bytes" else ""
                cell = doc.replace("|", "\\|").replace("\n", " ")
                rows.append(f"| `{option}` | `{default}` | {cell}{unit_text} |")
        return "\n".join(rows)


def _append(obj: griffe.Object, text: str) -> None:
    old = obj.docstring.value if obj.docstring else ""
    obj.docstring = griffe.Docstring(f"{old}\n\n{text}".strip(), parent=obj)


def _names_in_call(expr: str, function: str) -> list[str]:
    call = ast.parse(expr, mode="eval").body
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == function:
        return [a.id for a in call.args if isinstance(a, ast.Name)]
    return []


def _modules(pkg: griffe.Module) -> list[griffe.Module]:
    """The package's modules read from source files, subpackages included (no stubs twice)."""
    found: list[griffe.Module] = []
    for module in pkg.modules.values():
        if module.is_alias or not isinstance(module.filepath, Path):
            continue
        if module.filepath.suffix == ".py":
            found.append(module)
        if module.is_package:
            found += _modules(module)
    return found


class MagnetarDocs(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.name != "magnetar":
            return
        decls = _Declarations({str(m.filepath): m.filepath.read_text() for m in _modules(pkg)})

        # ``X.__doc__ = f"{X.__doc__}\n{option_docs(Opts)}"`` at module level
        for module in (pkg[m] for m in ("_handles",)):
            for node in ast.parse(module.filepath.read_text()).body:
                if (isinstance(node, ast.Assign) and len(node.targets) == 1
                        and isinstance(node.targets[0], ast.Attribute) and node.targets[0].attr == "__doc__"
                        and isinstance(node.targets[0].value, ast.Name)):
                    for call in ast.walk(node.value):
                        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "option_docs":
                            names = [a.id for a in call.args if isinstance(a, ast.Name)]
                            _append(module[node.targets[0].value.id], decls.table(*names))

        # ``@documented(Opts)`` on methods
        for module in pkg.modules.values():
            self._methods(module, decls)

        # ``__doc__ = Handle.__doc__`` in a class body
        for module in pkg.modules.values():
            for cls in module.classes.values():
                doc_attr = cls.members.get("__doc__")
                if doc_attr is not None and not doc_attr.is_alias and doc_attr.value is not None:
                    source = str(doc_attr.value)
                    if source.endswith(".__doc__"):
                        base = cls.resolved_bases
                        named = source[: -len(".__doc__")]
                        for b in base:
                            if b.name == named and b.docstring is not None:
                                cls.docstring = griffe.Docstring(b.docstring.value, parent=cls)
                    del cls.members["__doc__"]

    def _methods(self, module: griffe.Module, decls: _Declarations) -> None:
        for cls in module.classes.values():
            for member in cls.members.values():
                if member.is_alias or not member.is_function:
                    continue
                for decorator in member.decorators:
                    names = _names_in_call(str(decorator.value), "documented")
                    if names:
                        _append(member, decls.table(*names))
