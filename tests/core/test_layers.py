"""ra_agent is the pure core: no module imports dagster, directly or through a module it loads."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_no_dagster_import_in_ra_agent_source():
    offenders = []
    for path in sorted((ROOT / "ra_agent").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(ROOT)}:{node.lineno}" for n in names if n.split(".")[0] == "dagster"]
    assert offenders == []


def test_importing_every_core_module_loads_no_dagster():
    modules = sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for p in (ROOT / "ra_agent").rglob("*.py")
        if p.name != "__init__.py"
    )
    code = "import importlib, sys\n" + "".join(f"importlib.import_module({m!r})\n" for m in modules)
    code += "print('dagster' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"
