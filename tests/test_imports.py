"""No import circle in prism/: the modules form layers that import one way only."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "prism"

# Circles that only a function-level (lazy) import closes: import time never sees them, but the modules
# would know about each other. None is allowed. (Imports under TYPE_CHECKING are annotations only and are
# not edges.)
LAZY_CIRCLES: list[set[str]] = []


def module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(REPO_ROOT).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports(tree: ast.Module, modules: dict[str, Path], lazy: bool) -> set[str]:
    """The prism modules a module imports: at import time only, or also inside functions (``lazy``)."""
    found: set[str] = set()
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if is_type_checking(node):
            continue  # annotations only, never run
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            submodules = {f"{node.module}.{alias.name}" for alias in node.names} & set(modules)
            found.update(submodules or ({node.module} & set(modules)))
        if lazy or not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            pending.extend(ast.iter_child_nodes(node))
    return found


def circles(lazy: bool) -> list[set[str]]:
    """The strongly connected groups of more than one module in the import graph (Tarjan)."""
    modules = module_names()
    graph = {name: imports(ast.parse(path.read_text(encoding="utf-8")), modules, lazy)
             for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(group)

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return found


def test_no_module_imports_back_at_import_time() -> None:
    assert circles(lazy=False) == []


def test_no_new_circle_through_function_level_imports() -> None:
    found = circles(lazy=True)
    new = [group for group in found if group not in LAZY_CIRCLES]
    assert new == [], f"import circles: {new}"


def test_the_walk_sees_a_circle_when_there_is_one(tmp_path: Path) -> None:
    a = ast.parse("from prism.b import x\n")
    b = ast.parse("def f():\n    from prism.a import y\n")
    modules = {"prism.a": tmp_path, "prism.b": tmp_path}
    assert imports(a, modules, lazy=False) == {"prism.b"}
    assert imports(b, modules, lazy=False) == set() and imports(b, modules, lazy=True) == {"prism.a"}
