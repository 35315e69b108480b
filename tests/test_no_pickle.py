"""No pickle anywhere in the package: not imported, no torch.load, numpy loads with allow_pickle=False."""

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "hil"


def _calls(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            base = getattr(f.value, "id", "") if isinstance(f, ast.Attribute) else ""
            yield base, name, node


def test_no_pickle_in_the_package():
    files = sorted(PKG.rglob("*.py"))
    assert len(files) > 30
    for f in files:
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not any(
                    a.name in ("pickle", "cPickle", "dill", "joblib") for a in node.names
                ), f
            if isinstance(node, ast.ImportFrom):
                assert node.module not in ("pickle", "cPickle", "dill", "joblib"), f
        for base, name, node in _calls(tree):
            assert not (base == "torch" and name == "load"), f"{f}: torch.load unpickles"
            if base in ("np", "numpy") and name == "load":
                kw = {k.arg: k.value for k in node.keywords}
                assert (
                    "allow_pickle" in kw and getattr(kw["allow_pickle"], "value", True) is False
                ), f
            assert name not in ("loads",) or base in ("json",), f"{f}: {base}.{name}"
