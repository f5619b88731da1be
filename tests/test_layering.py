"""One direction of flow in the code: lower layers never import higher ones (DESIGN.md).

    Task -> World -> Episode -> Trajectory -> Grade -> (SFT data | RL reward | metrics | behaviours)

Every module's imports are read with ``ast``: top-level ones, those inside functions (lazy
imports count), relative ones, and ``importlib.import_module``/``__import__`` of a literal
name. Each is checked against ``MAY_IMPORT``, the rule table: which longhorizon package may
import which. A package missing from the table fails too, so a new one gets its place in the
flow. The checker itself is tested on a tiny fake tree with planted violations.
"""

from __future__ import annotations

import ast
from pathlib import Path

import longhorizon

SRC = Path(longhorizon.__file__).parent

BASE = {"core", "apps", "tasks", "env", "policies", "rollout"}
CONSUMERS = {"train", "evaluate", "analysis", "serve"}
"""What reads Trajectories and Grades: SFT data and RL (train), metrics (evaluate), behaviours
(analysis), and serving the trained model (serve). Siblings in the flow: each may use the others."""

MAY_IMPORT: dict[str, set[str]] = {
    "core": set(),                                    # Task, Criterion/Grade, World, Trajectory, Policy interface
    "apps": {"core"},                                 # the MCP apps whose state a World holds
    "tasks": {"core", "apps"},                        # families: build Worlds with the apps' state helpers
    "env": {"core", "apps", "tasks"},                 # Episode: a Task played over its World's apps
    "policies": {"core", "apps", "tasks"},            # what acts, through core.policy's interface
    "rollout": {"core", "apps", "tasks", "env"},      # many Episodes, persisted as Trajectories
    "testing": {"core"},                              # the stand-in model server tests talk to
    **{c: BASE | CONSUMERS - {c} for c in CONSUMERS},
    "adapters": BASE | CONSUMERS,                     # other frameworks' seams onto the whole
    "cli": BASE | CONSUMERS | {"adapters", "testing"},
}


def _module_name(root: Path, path: Path) -> tuple[str, bool]:
    """(dotted module name, whether it is a package's __init__) of a file under ``root``/longhorizon."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    is_init = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_init else parts), is_init


def _literal_prefix(node: ast.expr) -> str | None:
    """The literal text a string argument starts with (all of a constant, the head of an f-string)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value)
    return None


def imported_modules(tree: ast.AST, module: str, is_init: bool) -> list[tuple[int, str]]:
    """(line, dotted name) of everything ``module`` imports, wherever in the file it does."""
    package = module if is_init else module.rpartition(".")[0]
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            if name == "longhorizon":  # from longhorizon import tasks: each name may be a package
                out += [(node.lineno, f"longhorizon.{a.name}") for a in node.names]
            else:
                out.append((node.lineno, name))
        elif isinstance(node, ast.Call) and node.args:
            fn = node.func
            called = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
            text = _literal_prefix(node.args[0]) if called in ("import_module", "__import__") else None
            if text:
                out.append((node.lineno, text))
    return out


def violations(root: Path, rules: dict[str, set[str]]) -> list[str]:
    """Every import in the ``longhorizon`` tree under ``root`` that ``rules`` does not allow,
    as ``file:line: PKG imports NAME (PKG may import: ...)``."""
    found = []
    for path in sorted((root / "longhorizon").rglob("*.py")):
        module, is_init = _module_name(root, path)
        parts = module.split(".")
        if len(parts) < 2:  # longhorizon/__init__.py: the version, importing nothing of ours
            continue
        pkg = parts[1]
        where = path.relative_to(root)
        if pkg not in rules:
            found.append(f"{where}: package {pkg!r} has no place in the rule table (add it to MAY_IMPORT)")
            continue
        for line, name in imported_modules(ast.parse(path.read_text(encoding="utf-8")), module, is_init):
            target = name.split(".")
            if target[0] != "longhorizon" or len(target) < 2 or target[1] == pkg:
                continue
            top = root / "longhorizon" / target[1]
            if not (top.is_dir() or top.with_suffix(".py").is_file()):  # e.g. longhorizon.__version__
                continue
            if target[1] not in rules[pkg]:
                allowed = ", ".join(sorted(rules[pkg])) or "no other longhorizon package"
                found.append(f"{where}:{line}: {pkg} imports {name} ({pkg} may import: {allowed})")
    return found


def test_the_code_flows_one_way():
    assert violations(SRC.parent, MAY_IMPORT) == []


def test_the_table_keeps_the_design_rules():
    """core imports nothing of ours; env, rollout and apps never reach policies, train or evaluate."""
    assert MAY_IMPORT["core"] == set()
    for low in ("env", "rollout", "apps"):
        assert not MAY_IMPORT[low] & {"policies", "train", "evaluate"}, low
    real = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()} | {"cli"}
    assert real <= set(MAY_IMPORT), sorted(real - set(MAY_IMPORT))


def _tree(root: Path, files: dict[str, str]) -> Path:
    """A fake ``longhorizon`` tree: every package of the table (empty) plus ``files``."""
    packages = {f"longhorizon/{pkg}/__init__.py": "" for pkg in MAY_IMPORT if pkg != "cli"}
    for rel, text in {"longhorizon/__init__.py": "", **packages, **files}.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        for parent in p.relative_to(root).parents:  # every folder a package
            if str(parent) != ".":
                (root / parent / "__init__.py").touch()
    return root


def test_the_checker_finds_planted_violations_of_every_kind(tmp_path):
    root = _tree(tmp_path, {
        "longhorizon/core/task.py": "from longhorizon.core.grade import Grade\n",  # same package: fine
        "longhorizon/core/grade.py": "def load():\n    from longhorizon.tasks import registry\n",  # lazy
        "longhorizon/env/episode.py": "from ..policies.base import Policy\n",  # relative
        "longhorizon/rollout/runner.py": "import longhorizon.evaluate.metrics\n",
        "longhorizon/apps/user/sim.py": ("import importlib\n\ndef f(name):\n"
                                         "    return importlib.import_module(f'longhorizon.policies.{name}')\n"),
        "longhorizon/env/gym.py": "from longhorizon import train\n",
        "longhorizon/train/rl.py": "from longhorizon.rollout.runner import play_groups\n",  # allowed
        "longhorizon/newpkg/x.py": "",
    })
    found = violations(root, MAY_IMPORT)
    assert found == [
        "longhorizon/apps/user/sim.py:4: apps imports longhorizon.policies. (apps may import: core)",
        "longhorizon/core/grade.py:2: core imports longhorizon.tasks (core may import: no other longhorizon package)",
        "longhorizon/env/episode.py:1: env imports longhorizon.policies.base (env may import: apps, core, tasks)",
        "longhorizon/env/gym.py:1: env imports longhorizon.train (env may import: apps, core, tasks)",
        "longhorizon/newpkg/__init__.py: package 'newpkg' has no place in the rule table (add it to MAY_IMPORT)",
        "longhorizon/newpkg/x.py: package 'newpkg' has no place in the rule table (add it to MAY_IMPORT)",
        "longhorizon/rollout/runner.py:1: rollout imports longhorizon.evaluate.metrics "
        "(rollout may import: apps, core, env, tasks)",
    ]


def test_a_clean_tree_passes(tmp_path):
    root = _tree(tmp_path, {
        "longhorizon/core/task.py": "from longhorizon.core.grade import Grade\nimport json\n",
        "longhorizon/env/episode.py": "from longhorizon import __version__\nfrom longhorizon.core.task import Task\n",
        "longhorizon/cli.py": "def main():\n    from longhorizon.train.rl import run_rl\n",
    })
    assert violations(root, MAY_IMPORT) == []
