"""The package layout: imports run one way (core <- capabilities <- agent <- cli), no cycle, small modules."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "ra_agent"
MAX_LINES = 600

# Lower layers never import higher ones. Within a layer, imports stay inside one package.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("config", "models", "fileio", "hardware", "store", "workspace", "cliargs", "terminal"),
    ("llm",),
    ("embed",),
    ("ingest",),
    ("topics",),
    ("evidence",),
    ("screen",),
    ("ask",),
    ("agent",),
    ("cli",),
)
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}
# evidence/ by concern: each folder imports only those before it (the package's __init__ may use any)
EVIDENCE_FOLDERS = ("classes", "pico", "synthesis", "questions", "sr", "prisma", "reports", "living")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(CORE.rglob("*.py"))}


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """ra_agent modules `path` imports anywhere (top level, inside functions or under TYPE_CHECKING)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):  # TYPE_CHECKING imports count: a circle of annotations is still a circle
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in known else base)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports_of(path, name, set(mods)) for name, path in mods.items()}


def capability(name: str) -> str:
    return name.split(".")[1] if "." in name else "ra_agent"


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_every_package_is_placed_in_a_layer():
    unplaced = {capability(m) for m in modules()} - set(RANK) - {"ra_agent"}
    assert not unplaced, f"packages missing from LAYERS: {sorted(unplaced)}"


def test_no_import_cycle_anywhere():
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_imports_run_down_the_layers():
    wrong = []
    for src, targets in graph().items():
        for dst in targets:
            a, b = capability(src), capability(dst)
            if a == b or "ra_agent" in (a, b):
                continue
            if RANK[a] < RANK[b] or (RANK[a] == RANK[b] and a != b and len(LAYERS[RANK[a]]) > 1 and RANK[a] > 0):
                wrong.append(f"{src} imports {dst} ({a} is below {b})")
    assert not wrong, "imports against the layer order:\n" + "\n".join(sorted(wrong))


def test_the_cycle_finder_names_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_modules_are_small():
    long = {m: n for m, p in modules().items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_every_package_says_what_it_owns():
    for init in sorted(CORE.rglob("__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and "TODO" not in doc, f"{init.relative_to(ROOT)} needs a one-line docstring saying what it owns"


def test_the_dagster_layer_imports_only_public_names():
    """ra_assets imports `from ra_agent.<package> import <name in its __all__>` (or a core module), never deeper."""
    wrong = []
    for path in sorted((ROOT / "ra_assets").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ra_agent")):
                continue
            where = f"{path.relative_to(ROOT)}:{node.lineno}"
            target = CORE.joinpath(*node.module.split(".")[1:])
            if node.module.count(".") == 1 and target.with_suffix(".py").is_file():  # a core module (config, ...)
                continue
            init = target / "__init__.py"
            if node.module.count(".") != 1 or not init.is_file():
                wrong.append(f"{where}: from {node.module} (import from the package instead)")
                continue
            public = set()
            for stmt in ast.parse(init.read_text()).body:
                if isinstance(stmt, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in stmt.targets):
                    public = set(ast.literal_eval(stmt.value))
            wrong += [f"{where}: {a.name} is not in {node.module}.__all__" for a in node.names if a.name not in public]
    assert not wrong, "ra_assets reaches past the packages' public names:\n" + "\n".join(wrong)


def evidence_folder(name: str) -> str | None:
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "evidence" else None


def test_evidence_folders_import_only_the_folders_before_them():
    unplaced = {f for m in modules() if (f := evidence_folder(m)) and f not in EVIDENCE_FOLDERS}
    assert not unplaced, f"evidence folders missing from EVIDENCE_FOLDERS: {sorted(unplaced)}"
    wrong = []
    for src, targets in graph().items():
        a = evidence_folder(src)
        for dst in targets:
            b = evidence_folder(dst)
            if a and b and EVIDENCE_FOLDERS.index(b) > EVIDENCE_FOLDERS.index(a):
                wrong.append(f"{src} imports {dst} ({a} comes before {b})")
    assert not wrong, "evidence folders against their order:\n" + "\n".join(sorted(wrong))


def test_the_question_model_is_a_leaf_of_its_folder():
    model = "ra_agent.evidence.questions.model"
    own = {m for m in graph()[model] if m.startswith("ra_agent.evidence.questions")}
    assert not own, f"{model} imports its own folder: {sorted(own)}"


def test_type_checking_imports_count_as_edges(tmp_path):
    source = tmp_path / "mod.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ra_agent.config import Config\n")
    assert imports_of(source, "ra_agent.mod", {"ra_agent.config"}) == {"ra_agent.config"}
