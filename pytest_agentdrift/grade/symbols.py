"""What a frozen repository defines, read with `ast`, so an answer's citations
can be checked by structure rather than by word matching. No pytest.

`SymbolIndex.resolve("invoicekit.tax.tax_for")` says whether a dotted name an
answer cites exists: a module path and the names bound in it (definitions,
assignments, imports), a class and its members (methods, fields, attributes
set on `self`), or, for names the index cannot place (a local variable such
as `invoice.priced.tax`, a standard-library call), the name as the repository
writes it, followed only by names that occur in it. `TaxTable.lookup` fails because no class `TaxTable`
exists, `invoicekit.taxes.tax_for` because no module `invoicekit.taxes` does.
"""

from __future__ import annotations

import ast
import builtins
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

EVALUATOR_COMPONENT = "symbols"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class SymbolIndex:
    modules: dict[str, set[str]] = field(default_factory=dict)  # dotted module -> names bound at top level
    classes: dict[str, set[str]] = field(default_factory=dict)  # class name -> member names (all classes of that name)
    text: str = ""  # every text file of the repository, joined
    identifiers: set[str] = field(default_factory=set)
    stdlib_imports: dict[str, tuple[str, str]] = field(default_factory=dict)  # `Decimal` -> ("decimal", "Decimal")

    @classmethod
    def build(cls, repo: Path, files: Iterable[str]) -> SymbolIndex:
        """The index of `files` (paths relative to `repo`): an unreadable file is left out, and a
        Python file that does not parse is text and a module binding nothing."""
        idx = cls()
        chunks = []
        for rel in sorted(files):
            try:
                source = (repo / rel).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            chunks.append(source)
            if rel.endswith(".py"):
                idx._add_module(rel, source)
        idx.text = "\n".join(chunks)
        idx.identifiers = set(_IDENT.findall(idx.text))
        return idx

    def _add_module(self, rel: str, source: str) -> None:
        """Records the module at `rel` (a `.py` path), the packages on its way, and what its top level binds."""
        parts = rel[:-3].split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not parts:
            return
        module = ".".join(parts)
        for i in range(1, len(parts)):  # every package on the way is a module too
            self.modules.setdefault(".".join(parts[:i]), set()).add(parts[i])
        names = self.modules.setdefault(module, set())
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return
        for node in tree.body:
            names.update(_bound_names(node))
            self._add_stdlib_import(node)
            if isinstance(node, ast.ClassDef):
                self.classes.setdefault(node.name, set()).update(_members(node))

    def _add_stdlib_import(self, node: ast.stmt) -> None:
        """Records the names an absolute `from <standard-library module> import ...` binds; any other
        statement adds nothing."""
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and node.module.split(".", 1)[0] in sys.stdlib_module_names
        ):
            for alias in node.names:
                self.stdlib_imports[alias.asname or alias.name] = (node.module, alias.name)

    def resolve(self, dotted: str) -> bool:
        """Whether a dotted name cited in an answer exists in (or is plainly used by) the repository."""
        parts = dotted.split(".")
        for cut in range(len(parts), 1, -1):
            # written so in the repository (`invoice.priced`, `json.load`): what follows must at least occur there
            if re.search(rf"(?<![\w.]){re.escape('.'.join(parts[:cut]))}(?![\w])", self.text):
                return all(p in self.identifiers for p in parts[cut:])
        # the longest module prefix decides: what follows must be bound there
        for cut in range(len(parts), 0, -1):
            module = ".".join(parts[:cut])
            if module in self.modules:
                return self._attr_chain(self.modules[module], parts[cut:])
        return self._resolve_unplaced(parts)

    def _resolve_unplaced(self, parts: list[str]) -> bool:
        """Whether a dotted name exists that neither occurs as written nor starts with a module of the
        repository: decided by what its head names."""
        top_packages = {m.split(".", 1)[0] for m in self.modules}
        if parts[0] in top_packages:
            return False  # a package of this repository, but not a module it has
        if parts[0] in self.classes:
            return self._class_chain(parts[0], parts[1:])
        leaves = [m for m in self.modules if m.rsplit(".", 1)[-1] == parts[0]]
        if leaves:  # `tax.tax_for`: a module named by its last component
            return any(self._attr_chain(self.modules[m], parts[1:]) for m in leaves)
        if parts[0] in self.stdlib_imports:  # `Decimal.quantize`: a standard-library name the repository imports
            module, name = self.stdlib_imports[parts[0]]
            return _stdlib_chain(module, [name, *parts[1:]])
        if parts[0] in sys.stdlib_module_names or hasattr(builtins, parts[0]):
            return True  # the standard library is not the fixture's to vouch for
        if parts[0][:1].isupper() and parts[0] not in self.identifiers:
            return False  # looks like a class, and none of that name exists
        # an unknown head (a local variable, an argument): every part must at least occur
        return all(p in self.identifiers for p in parts)

    def _attr_chain(self, names: set[str], rest: list[str]) -> bool:
        if not rest:
            return True
        head = rest[0]
        if head not in names:
            return False
        if head in self.classes and len(rest) > 1:
            return self._class_chain(head, rest[1:])
        return True  # beyond a function or a value the type is unknown: not judged

    def _class_chain(self, cls: str, rest: list[str]) -> bool:
        if not rest:
            return True
        return rest[0] in self.classes.get(cls, set())

    def defines(self, name: str) -> bool:
        """A bare identifier: defined or used anywhere in the repository."""
        return name in self.identifiers


def _stdlib_chain(module: str, attrs: list[str]) -> bool:
    import importlib

    try:
        obj = importlib.import_module(module)
    except ImportError:
        return True  # not importable here: not ours to judge
    for attr in attrs:
        if not hasattr(obj, attr):
            return False
        obj = getattr(obj, attr)
    return True


def _assigned_names(node: ast.Assign | ast.AnnAssign | ast.AugAssign) -> set[str]:
    """The names an assignment binds: every plain name in its targets, unpacked ones included."""
    out: set[str] = set()
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    for target in targets:
        for sub in ast.walk(target):
            if isinstance(sub, ast.Name):
                out.add(sub.id)
    return out


def _bound_names(node: ast.stmt) -> set[str]:
    """The names a statement binds in its scope: a definition's, an import's, an assignment's, and
    those of the statements inside an `if`, `try` or `with`."""
    out: set[str] = set()
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        out.add(node.name)
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        for alias in node.names:
            out.add((alias.asname or alias.name).split(".", 1)[0])
    elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        out |= _assigned_names(node)
    elif isinstance(node, (ast.If, ast.Try, ast.With)):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                out |= _bound_names(child)
    return out


def _members(cls: ast.ClassDef) -> set[str]:
    out: set[str] = set()
    for node in cls.body:
        out |= _bound_names(node)
    for sub in ast.walk(cls):
        if (
            isinstance(sub, ast.Attribute)
            and isinstance(sub.value, ast.Name)
            and sub.value.id == "self"
            and isinstance(sub.ctx, ast.Store)
        ):
            out.add(sub.attr)
    for base in cls.bases:  # an exception class has the members of its standard base
        if isinstance(base, ast.Name) and hasattr(builtins, base.id):
            out |= set(dir(getattr(builtins, base.id)))
    return out


_FILE_EXTENSIONS = frozenset(
    {
        "py",
        "md",
        "toml",
        "txt",
        "json",
        "cfg",
        "ini",
        "lock",
        "yaml",
        "yml",
        "sh",
        "js",
        "ts",
        "whl",
        "zip",
        "csv",
        "html",
        "rst",
        "pyc",
    }
)
_BACKTICKED = re.compile(r"`([A-Za-z_][\w.]*)(?:\(\))?`")
_DOTTED = re.compile(r"(?<![\w./-])([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?![\w/-])")
_CALLED = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\(\)")
#: modules whose names an explanation of Python code cites without the repository using them verbatim
_STDLIB_ATTRS = ("builtins", "decimal", "json", "argparse", "pathlib", "sys", "dataclasses")


def cited_symbols(text: str) -> set[str]:
    """The code names an answer cites: `backticked` ones, dotted names (backticked
    or not: `invoicekit.tax.tax_for`, TaxTable.lookup) and bare calls (`tax_for()`)."""
    found = set(_BACKTICKED.findall(text)) | set(_CALLED.findall(text))
    for name in _DOTTED.findall(text):
        parts = name.split(".")
        if parts[-1] in _FILE_EXTENSIONS or all(len(p) == 1 for p in parts):
            continue  # a file name (`tax_rates.json`) or an abbreviation (e.g)
        found.add(name)
    return {s for s in found if not (s.rsplit(".", 1)[-1] in _FILE_EXTENSIONS and "." in s)}


def symbol_exists(index: SymbolIndex, symbol: str) -> bool:
    if "." in symbol:
        return index.resolve(symbol)
    if index.defines(symbol):
        return True
    import importlib

    return any(hasattr(importlib.import_module(m), symbol) for m in _STDLIB_ATTRS)
