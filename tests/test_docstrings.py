"""Docstrings state the shape and dtype of every array or tensor a public function takes or
returns (issue 14).

The reader walks the modules below with ``ast`` (nothing is imported), finds each public
function, method and constructor (``__init__`` of a public class: the class docstring or the
``__init__`` docstring may carry it) whose parameter or return annotations mention ``Tensor`` or
``ndarray``, and each dataclass field annotated so; their docstrings must name a shape in brackets
(``[B, k]``, ``[n]``, ``[..., n]``) and a dtype word (``complex64``, ``float32``, ... or ``real`` /
``complex`` where the function is generic).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATTERNS = [
    "hil/channel/*.py",
    "hil/phy/*.py",
    "hil/jscc/*.py",
    "hil/baseline/*.py",
    "hil/convert.py",
    "hil/transport/*.py",
    "hil/record/*.py",
]
ARRAY = re.compile(r"\b(?:torch\.)?Tensor\b|\b(?:np\.|numpy\.)?ndarray\b")
SHAPE = re.compile(r"\[[^\]]*\]")
DTYPE = re.compile(
    r"\b(?:complex64|complex128|float32|float64|int16|int32|int64|uint8|bool|real|complex)\b"
)


def _files() -> list[Path]:
    out: set[Path] = set()
    for pat in PATTERNS:
        out.update(ROOT.glob(pat))
    return sorted(out)


def _mentions_array(node: ast.expr | None) -> bool:
    return node is not None and bool(ARRAY.search(ast.unparse(node)))


def _takes_or_returns_array(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    a = fn.args
    params = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    params += [p for p in (a.vararg, a.kwarg) if p is not None]
    return any(_mentions_array(p.annotation) for p in params) or _mentions_array(fn.returns)


def _is_dataclass(cls: ast.ClassDef) -> bool:
    for d in cls.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if ast.unparse(target).split(".")[-1] == "dataclass":
            return True
    return False


def _states_shape_and_dtype(doc: str | None) -> bool:
    return bool(doc) and bool(SHAPE.search(doc)) and bool(DTYPE.search(doc))


def _field_entry(doc: str, name: str) -> str | None:
    """A field's entry in its class docstring: the line ``name: ...`` (or ``a, name: ...``)
    and its continuation lines, up to the next entry."""
    m = re.search(
        rf"^[ \t]*(?:\w+,\s*)*{re.escape(name)}(?:,\s*\w+)*:.*(?:\n(?![ \t]*[\w, ]+:).*)*",
        doc,
        re.M,
    )
    return None if m is None else m.group(0)


Entry = tuple[str, int, str, str, bool]


def _visit(
    body: list[ast.stmt],
    cls: ast.ClassDef | None,
    prefix: str,
    rel: str,
    lines: list[str],
    found: list[Entry],
) -> None:
    for node in body:
        if isinstance(node, ast.ClassDef):
            if not node.name.startswith("_"):
                _visit(node.body, node, f"{prefix}{node.name}.", rel, lines, found)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            is_init = cls is not None and node.name == "__init__"
            if (node.name.startswith("_") and not is_init) or not _takes_or_returns_array(node):
                continue
            ok = _states_shape_and_dtype(ast.get_docstring(node))
            if is_init and not ok:  # the class docstring documents the constructor
                ok = _states_shape_and_dtype(ast.get_docstring(cls))
            found.append((rel, node.lineno, f"{prefix}{node.name}", "function", ok))
        elif (
            isinstance(node, ast.AnnAssign)
            and cls is not None
            and _is_dataclass(cls)
            and isinstance(node.target, ast.Name)
            and not node.target.id.startswith("_")
            and _mentions_array(node.annotation)
        ):
            # the field's own entry in the class docstring, or a comment on its line
            entry = _field_entry(ast.get_docstring(cls) or "", node.target.id)
            comment = lines[node.lineno - 1].partition("#")[2]
            ok = _states_shape_and_dtype(comment) or _states_shape_and_dtype(entry)
            found.append((rel, node.lineno, f"{prefix}{node.target.id}", "field", ok))


def collect() -> list[Entry]:
    """(file, line, qualified name, "function" or "field", docstring states shape and dtype) per
    public function, method, constructor or dataclass field that takes, returns or holds an
    array or tensor."""
    found: list[Entry] = []
    for path in _files():
        rel = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        _visit(ast.parse(text, filename=rel).body, None, "", rel, text.splitlines(), found)
    return found


def test_reader_finds_the_array_functions():
    functions = [f for f in collect() if f[3] == "function"]
    assert len(functions) >= 60, f"found only {len(functions)} array-taking functions"


def test_docstrings_state_shape_and_dtype():
    offenders = [f"{rel}:{line} {name}" for rel, line, name, _, ok in collect() if not ok]
    assert not offenders, (
        f"{len(offenders)} public functions or dataclass fields take or return arrays or "
        "tensors without a shape in brackets and a dtype in their docstring:\n"
        + "\n".join(offenders)
    )


def test_the_checks_reject_what_they_should():
    assert _states_shape_and_dtype("x: [B, n] complex64 samples")
    assert _states_shape_and_dtype("returns [..., n] same dtype, real")
    assert not _states_shape_and_dtype("x: complex64 samples")
    assert not _states_shape_and_dtype("x: [B, n] samples")
    assert not _states_shape_and_dtype(None)
    fn = ast.parse("def f(x: np.ndarray) -> int: ...").body[0]
    assert _takes_or_returns_array(fn)
    fn = ast.parse("def f(x: int) -> torch.Tensor | None: ...").body[0]
    assert _takes_or_returns_array(fn)
    fn = ast.parse("def f(x: int, tensors: list[int]) -> str: ...").body[0]
    assert not _takes_or_returns_array(fn)
    doc = "Attributes:\n    y: [B, N] complex64 output.\n    h: channel\n        [B, N] estimate."
    assert _states_shape_and_dtype(_field_entry(doc, "y"))
    assert not _states_shape_and_dtype(_field_entry(doc, "h"))
    assert _field_entry(doc, "z") is None
