"""The broker never imports the pipeline, so its install needs no PySpark."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PIPELINE_ONLY = ("workers.pipeline", "pyspark", "pyarrow", "pandas")


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_no_broker_module_imports_the_pipeline_or_spark():
    broker = [*(ROOT / "app").rglob("*.py"), *(ROOT / "workers").glob("*.py"),
              ROOT / "gunicorn.conf.py"]
    offending = {f"{path.relative_to(ROOT)}: {name}" for path in broker
                 for name in imported_modules(path)
                 if any(name == banned or name.startswith(banned + ".")
                        for banned in PIPELINE_ONLY)}
    assert not offending
