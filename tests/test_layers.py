"""The import graph: data flows down the layers (channel -> phy -> jscc -> baseline -> radio /
transport -> apps), with no arrow back up and no cycle between packages. Read from the source
(every import, including the ones inside functions)."""

import ast
from pathlib import Path

HIL = Path(__file__).resolve().parents[1] / "hil"

# package -> its layer; a package may import only packages of a lower layer
LAYER = {
    "convert": 0,
    "channel": 1,
    "phy": 2,
    "demos": 2,
    "jscc": 3,
    "baseline": 4,
    "record": 7,  # reads the Pluto facts of radio
    "transport": 5,
    "radio": 6,
    "twin": 7,
    "dashboard": 7,
    "apps": 8,
    "cli": 9,
}


def package_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "hil" and len(parts) > 1 else None


def imports(path: Path) -> set[str]:
    """Absolute names of the hil modules a file imports."""
    rel = path.relative_to(HIL.parent).with_suffix("")
    here = list(rel.parts if rel.name != "__init__" else rel.parts[:-1])
    if rel.name != "__init__":
        here = here[:-1]  # the package a module sits in
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("hil.")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.startswith("hil."):
                out.add(mod)
    return out


def graph() -> dict[str, set[str]]:
    g: dict[str, set[str]] = {}
    for f in HIL.rglob("*.py"):
        src = package_of("hil." + ".".join(f.relative_to(HIL).with_suffix("").parts))
        if src == "__init__":  # hil/__init__.py: the root imports none of its packages
            assert not imports(f), imports(f)
            continue
        deps = {package_of(m) for m in imports(f)} - {src, None}
        g.setdefault(src, set()).update(deps)
    return g


def test_every_package_has_a_layer():
    assert set(graph()) <= set(LAYER), set(graph()) - set(LAYER)


def test_no_import_goes_up_the_layers():
    up = sorted(
        f"{src} -> {dep}"
        for src, deps in graph().items()
        for dep in deps
        if LAYER[dep] >= LAYER[src]
    )
    assert up == []


def test_no_cycle_between_packages():
    g = graph()
    state: dict[str, int] = {}

    def visit(n, path):
        if state.get(n) == 1:
            raise AssertionError("cycle: " + " -> ".join([*path, n]))
        if state.get(n) == 2:
            return
        state[n] = 1
        for m in sorted(g.get(n, ())):
            visit(m, [*path, n])
        state[n] = 2

    for n in sorted(g):
        visit(n, [])


def test_the_reader_sees_relative_and_lazy_imports():
    """The checks above are only as good as the reader: it must see the imports that exist."""
    g = graph()
    assert "jscc" in g["baseline"]  # from ..jscc.decoders import ... (relative)
    assert "baseline" in g["apps"]  # imported inside functions too
    assert "radio" in g["twin"]
