"""Check the import contract of the course's code: each layer imports only the layers below it.

Layers, lowest first: ``sharedarrays`` (the take-home library, ``library/sharedarrays``, a
distribution of its own) <- ``helpers.measure`` <- ``helpers.lessons`` <- ``helpers.bench``.
Every ``import`` and ``from ... import`` statement counts, also one inside a function (a lazy import
still makes the dependency). The library may import only the standard library and NumPy; torch
only in a module that the rest of the library imports inside a function (so torch loads only when
asked for). No module may import a private name (``_name``) of another layer, and no two modules
may import each other, directly or through others (function-level imports count here too).
The library's own tests (``library/tests``, beside the package) import only the standard library,
NumPy, pytest, torch, ``sharedarrays`` and their own modules.
``python -m tools.check_layers [HELPERS_DIR [LIBRARY_DIR]]`` prints each violation with its file
and line and exits 1 if there is any (``make lint`` runs it).
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent
LAYERS = ("sharedarrays", "helpers.measure", "helpers.lessons", "helpers.bench")
OURS = ("sharedarrays", "helpers")  # top-level names whose imports make the graph
LIBRARY_THIRD_PARTY = {"numpy"}  # what sharedarrays may import besides the standard library
LIBRARY_LAZY_ONLY = {"torch"}  # only in modules the rest of the library imports inside a function


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name of the file
    imported: str  # dotted module name imported (for "from X import y": X.y if a module, else X)
    names: tuple[str, ...]
    line: int
    top_level: bool


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(dotted: str, roots: list[Path]) -> bool:
    """True if ``dotted`` names a module or package file under one of the package folders."""
    for root in roots:
        if dotted.split(".")[0] != root.name:
            continue
        where = root.parent / Path(*dotted.split("."))
        if where.with_suffix(".py").exists() or (where / "__init__.py").exists():
            return True
    return False


def imports_of(path: Path, root: Path, roots: list[Path] | None = None) -> list[Import]:
    """Every import statement of one file, with whether it runs at import time (module level);
    ``roots``: every package folder a ``from X import y`` may name a module of (default: ``root``)."""
    roots = [root] if roots is None else roots
    tree = ast.parse(path.read_text(), str(path))
    importer = module_name(path, root)
    package = importer if path.name == "__init__.py" else importer.rpartition(".")[0]
    top_level_nodes = set()
    for node in tree.body:
        for child in ast.walk(node) if isinstance(node, (ast.If, ast.Try, ast.With)) else [node]:
            top_level_nodes.add(id(child))
    type_checking_only = {id(child) for node in ast.walk(tree) if isinstance(node, ast.If)
                          and "TYPE_CHECKING" in ast.unparse(node.test) for child in ast.walk(node)}
    found = []
    for node in ast.walk(tree):
        if id(node) in type_checking_only:
            continue  # read by type checkers only, never run
        top = id(node) in top_level_nodes
        if isinstance(node, ast.Import):
            found += [Import(importer, alias.name, (), node.lineno, top) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = tuple(alias.name for alias in node.names)
            for name in names:
                candidate = f"{base}.{name}"
                is_module = _is_module(candidate, roots)
                found.append(Import(importer, candidate if is_module else base, (name,), node.lineno, top))
    return found


def layer_of(module: str) -> int | None:
    """The index in ``LAYERS`` of the layer ``module`` belongs to, or None (not ours)."""
    for index, layer in enumerate(LAYERS):
        if module == layer or module.startswith(layer + "."):
            return index
    return None


def violations(root: Path, library: Path | None = None) -> list[str]:
    """Every broken rule under the package folders ``root`` (``helpers/``) and ``library``
    (``library/sharedarrays/``, the default), one line each."""
    library = REPOSITORY / "library" / "sharedarrays" if library is None else library
    problems, graph = [], {}
    stdlib = set(sys.stdlib_module_names)
    every = {path: imports_of(path, package, [root, library])
             for package in (library, root) for path in sorted(package.rglob("*.py"))}
    lazy_modules = {imp.importer for found in every.values() for imp in found
                    if layer_of(imp.importer) == 0 and imp.imported.split(".")[0] in LIBRARY_LAZY_ONLY}
    for path, found in every.items():
        where = path.relative_to((library if path.is_relative_to(library) else root).parent)
        for imp in found:
            here, there = layer_of(imp.importer), layer_of(imp.imported)
            if imp.imported.split(".")[0] in OURS and imp.imported != imp.importer:
                graph.setdefault(imp.importer, set()).add(imp.imported)
            if here == 0 and imp.imported in lazy_modules and imp.top_level:
                problems.append(f"{where}:{imp.line}: {imp.importer} imports {imp.imported} at module "
                                "level: it imports torch, so import it inside the function that needs it")
            if here is not None and there is not None and there > here:
                problems.append(f"{where}:{imp.line}: {imp.importer} ({LAYERS[here]}) imports "
                                f"{imp.imported} ({LAYERS[there]}), a layer above it")
            if there is not None and here != there:
                private = [n for n in imp.names if n.startswith("_")] + (
                    [imp.imported] if imp.imported.rpartition(".")[2].startswith("_") else [])
                if private:
                    problems.append(f"{where}:{imp.line}: {imp.importer} imports private "
                                    f"{', '.join(private)} of another layer")
            if here == 0 and not imp.imported.startswith("sharedarrays"):
                top = imp.imported.split(".")[0]
                lazy_ok = top in LIBRARY_LAZY_ONLY
                if (top not in stdlib and top not in LIBRARY_THIRD_PARTY and not lazy_ok
                        and top != "__future__"):
                    problems.append(f"{where}:{imp.line}: the library imports {imp.imported}: "
                                    "only the standard library and NumPy (torch inside a function)")
    problems += [f"import cycle: {' -> '.join(cycle)}" for cycle in cycles(graph)]
    return problems


LIBRARY_TESTS_THIRD_PARTY = {"numpy", "pytest", "torch"}  # torch: its cases skip where it is missing


def library_test_violations(tests: Path) -> list[str]:
    """Every import in the library's own tests (``library/tests``) of anything but the standard
    library, NumPy, pytest, torch, ``sharedarrays`` and the modules beside them: they must run in a
    venv with only the library, NumPy and pytest, so never import the course's ``helpers`` or ``tests``."""
    problems = []
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    beside = {path.stem for path in tests.glob("*.py")}
    for path in sorted(tests.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in stdlib | LIBRARY_TESTS_THIRD_PARTY | beside | {"sharedarrays"}:
                    where = f"{tests.parent.name}/{tests.name}/{path.name}:{node.lineno}"
                    problems.append(f"{where}: the library's tests import {name}: only the standard "
                                    "library, NumPy, pytest, torch, sharedarrays and the modules beside them")
    return problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Cycles among imports (one per strongly connected set of modules)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1 or node in graph.get(node, ()):
                found.append(sorted(group) + [sorted(group)[0]])

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0] if args else REPOSITORY / "helpers").resolve()
    library = Path(args[1] if len(args) > 1 else REPOSITORY / "library" / "sharedarrays").resolve()
    problems = violations(root, library)
    if (library.parent / "tests").is_dir():
        problems += library_test_violations(library.parent / "tests")
    for problem in problems:
        print(problem)
    print(f"import contract of {library.name}/ and {root.name}/ ({' <- '.join(LAYERS)}): "
          f"{'broken, ' + str(len(problems)) + ' violation(s)' if problems else 'kept'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
