"""The layout of prism/: packages in layers that import one way only, no circle, a short top level.

Every import counts: at module level, inside functions (lazy) and under TYPE_CHECKING (a module that names
another's types knows about it). A new package or top-level module takes its place in :data:`ORDER`.
"""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "prism"

# Bottom first: a unit may import only itself and the units before it. A unit is a top-level module or a
# package of prism/ (everything below prism.run is prism.run).
ORDER = [
    "prism",  # __init__: the version only
    "prism.errors",
    "prism.names",  # every MLflow name, and LoggedRun: the standard library only
    "prism.types",
    "prism.turns",
    "prism.records",
    "prism.formatting",
    "prism.config",
    "prism.label_probs",
    "prism.cloze",
    "prism.parsing",
    "prism.questions",
    "prism.stats",
    "prism.render",
    "prism.conditions",
    "prism.backends",
    "prism.results",
    "prism.conf",
    "prism.logged_config",
    "prism.run",
    "prism.compare",
    "prism.plan",
    "prism.publish",
    "prism.importer",
    "prism.reproduce",
    "prism.upload",
    "prism.__main__",
]


def module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(REPO_ROOT).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def imports(path: Path, modules: dict[str, Path]) -> set[str]:
    """Every prism module ``path`` imports, wherever the import stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            submodules = {f"{node.module}.{alias.name}" for alias in node.names} & set(modules)
            found.update(submodules or ({node.module} & set(modules)))
    return found


def graph() -> dict[str, set[str]]:
    modules = module_names()
    return {name: imports(path, modules) - {name} for name, path in modules.items()}


def unit(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_every_module_belongs_to_a_unit_of_the_order() -> None:
    unplaced = sorted({unit(m) for m in module_names()} - set(ORDER))
    assert not unplaced, f"place these in ORDER (bottom first): {unplaced}"


def test_units_import_only_themselves_and_the_units_below() -> None:
    rank = {name: i for i, name in enumerate(ORDER)}
    upward = sorted(f"{source} -> {target}" for source, targets in graph().items() for target in targets
                    if rank[unit(target)] > rank[unit(source)])
    assert not upward, "imports that run back up a layer:\n" + "\n".join(upward)


def circles(edges: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in edges[node]:
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

    for name in sorted(edges):
        if name not in index:
            visit(name)
    return found


def test_no_module_imports_one_that_imports_it_back() -> None:
    # Within a package too, and through lazy and TYPE_CHECKING imports: none is allowed.
    assert circles(graph()) == []


def test_the_circle_finder_finds_a_circle() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]


def test_the_top_level_holds_at_most_twelve_modules() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(top) <= 12, top
