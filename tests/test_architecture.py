"""The house rules, checked on the code itself: core has no Qt, no import circles, the
session does not know the engine, the CLI imports no view, files stay small, and node
names are parsed only in nodes.py."""

import ast
import inspect
import re
from pathlib import Path

from explorer.core.gpt.families import FAMILIES
from explorer.ui.views.registry import SHARED, VIEWS, WORKSPACES

ROOT = Path(__file__).resolve().parents[1] / "explorer"
MODULES = {p: ".".join(p.relative_to(ROOT.parent).with_suffix("").parts) for p in ROOT.rglob("*.py")}
NAMES = {name.removesuffix(".__init__"): p for p, name in MODULES.items()}


def _typing_only(tree: ast.AST) -> set[int]:
    """The ids of the nodes inside ``if TYPE_CHECKING:`` blocks: imports for annotations
    only, which never run."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            inside |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    return inside


def imports(path: Path) -> set[str]:
    """Every module a file imports, anywhere in it (also inside functions), absolute;
    not those of annotations only (``if TYPE_CHECKING:``)."""
    package = MODULES[path].removesuffix(".__init__")
    if not path.name == "__init__.py":
        package = package.rsplit(".", 1)[0]
    found = set()
    tree = ast.parse(path.read_text())
    typing_only = _typing_only(tree)
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            if node.level:
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            found.add(module)
            found |= {f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in NAMES}
    return found


CORE_LAYERS = ("base", "gpt", "run", "weights", "lessons", "attribution",
               "experiments", "playground")  # bottom first
UI_LAYERS = ("base", "widgets", "plots", "graph", "views", "window")
PACKAGES = ({"explorer", "explorer.core", "explorer.ui", "explorer.cli"}
            | {f"explorer.core.{p}" for p in CORE_LAYERS} | {f"explorer.ui.{p}" for p in UI_LAYERS})


def ours(path: Path) -> set[str]:
    """The project's modules a file imports (a package's own __init__ aside)."""
    own = MODULES[path].removesuffix(".__init__")
    return {m for m in imports(path) if m in NAMES and m != own and m not in PACKAGES}


def test_core_never_imports_qt():
    for path, name in MODULES.items():
        if name.startswith("explorer.core"):
            qt = {m for m in imports(path) if m.split(".")[0] in ("PySide6", "pyqtgraph", "shiboken6")}
            assert not qt, f"{name} imports {qt}"
            assert not {m for m in ours(path) if m.startswith("explorer.ui")}, name


def test_there_is_no_import_circle():
    graph = {name.removesuffix(".__init__"): {m for m in ours(p) if not m.endswith("__init__")}
             for p, name in MODULES.items()}
    graph = {k: {m for m in v if m != "explorer" and not (k.startswith(m + "."))} for k, v in graph.items()}
    state: dict[str, int] = {}

    def visit(node, trail):
        state[node] = 1
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                raise AssertionError("import circle: " + " -> ".join(trail + [node, nxt]))
            if nxt not in state:
                visit(nxt, trail + [node])
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node, [])


def test_the_session_does_not_know_the_engine_and_the_cli_imports_no_view():
    session = NAMES["explorer.ui.base.session"]
    assert not {m for m in ours(session) if m in ("explorer.ui.base.engine", "explorer.ui.base.jobs")}
    views = {inspect.getmodule(v.cls).__name__ for v in VIEWS}
    for path, name in MODULES.items():
        if name.startswith("explorer.cli"):
            assert not (ours(path) & views), f"{name} imports a view"
            assert {m for m in ours(path) if m.startswith("explorer.ui")} <= {
                "explorer.ui.window.app", "explorer.ui.views.registry",  # the workspaces' names
                "explorer.ui.plots.figures", "explorer.ui.plots.gradient_plots",
                "explorer.ui.plots.patch_plots", "explorer.ui.plots.why_plots"}, name


def test_every_view_lives_in_its_workspaces_folder_and_is_listed_once():
    keys = [v.key for v in VIEWS]
    assert len(set(keys)) == len(keys)
    groups = {w.key for w in WORKSPACES}
    assert len(groups) == len(WORKSPACES) == 5
    listed = [v.module for v in VIEWS]
    assert len(set(listed)) == len(listed)  # one module a view
    for spec in VIEWS:
        assert spec.group in groups | {SHARED}, spec.key
        assert spec.module.rsplit(".", 2)[-2] == spec.group, spec.module  # its folder
        assert spec.module.endswith("_view") and spec.module in NAMES, spec.module
        assert inspect.getmodule(spec.cls).__name__ == spec.module
    views = ROOT / "ui" / "views"
    on_disk = {MODULES[p] for p in views.rglob("*_view.py")}
    assert on_disk == set(listed)  # every view module is listed, none twice
    assert not list(views.glob("*_view.py"))  # none outside a workspace's folder
    for ws in groups:  # every workspace has views of its own, few enough for one strip
        assert 3 <= sum(v.group == ws for v in VIEWS) <= 7, ws  # (test_room measures it)
    assert [v.key for v in VIEWS if v.group == SHARED] == ["graph", "prompt"]
    for path in views.rglob("*_view.py"):  # no view knows another
        assert not {m for m in ours(path) if m in set(listed)}, MODULES[path]


def test_no_view_is_built_with_an_engine_of_none():
    """Every view takes the session and the engine (typed, no default); none keeps an
    engine of its own to call: its jobs go through ViewJobs, which refuses None."""
    import pytest

    from explorer.ui.base.view import ViewHooks
    from explorer.ui.base.view_jobs import ViewJobs
    for spec in VIEWS:
        signature = inspect.signature(spec.cls.__init__)
        assert list(signature.parameters)[1:3] == ["session", "engine"], spec.cls
        engine = signature.parameters["engine"]
        assert engine.default is inspect.Parameter.empty and engine.annotation == "EngineLike"
        assert issubclass(spec.cls, ViewHooks), spec.cls  # the hooks the window calls
        source = inspect.getsource(inspect.getmodule(spec.cls))
        assert "self.engine" not in source and "engine=None" not in source, spec.key
    with pytest.raises(TypeError, match="needs the engine"):
        ViewJobs(None, print)


def layer(name: str) -> tuple[str, int] | None:
    """('core' or 'ui', the layer's height) of a module in a subpackage."""
    parts = name.split(".")
    layers = {"core": CORE_LAYERS, "ui": UI_LAYERS}.get(parts[1]) if len(parts) > 3 else None
    return (parts[1], layers.index(parts[2])) if layers and parts[2] in layers else None


def test_subpackages_import_only_downwards():
    """base < gpt < run < weights < lessons < attribution < experiments < playground in
    core, base <
    widgets < plots
    < graph < views < window in the UI; core's own root modules (sources) sit on top."""
    assert all(layer(n) for p, n in MODULES.items() if n.count(".") == 3
               and n.split(".")[1] in ("core", "ui"))  # every module in a layer
    for path, name in MODULES.items():
        mine = layer(name)
        for module in ours(path):
            theirs = layer(module)
            if mine and theirs and theirs[0] == mine[0]:
                assert theirs[1] <= mine[1], f"{name} imports {module}, a layer above it"
            if mine and mine[0] == "core" and module.startswith("explorer.core.") and not theirs:
                raise AssertionError(f"{name} imports {module}, which sits above core's layers")


def test_no_file_is_over_400_lines():
    long = {name: n for p, name in MODULES.items() if (n := len(p.read_text().splitlines())) > 400}
    assert not long


# the node table: the functions, the record of a family, each family's file (its nodes)
FAMILY_FILES = tuple(sorted(n for n in MODULES.values() if n.startswith("explorer.core.gpt.families.")
                            and not n.endswith("__init__")))
NODE_TABLE = ("explorer.core.gpt.nodes", "explorer.core.gpt.family",
              "explorer.core.gpt.placements") + FAMILY_FILES
# state-dict key maps: parameter names (trf_blocks.0.att.W_query.weight), weights, not nodes
KEY_MAPS = ("explorer.core.weights.keymaps", "explorer.core.weights.book_blocks") + tuple(
    dict.fromkeys(f.files.key_maps for f in FAMILIES.values()))  # each family's


def test_hook_names_are_split_only_in_the_node_table():
    pattern = re.compile(r"""split\(["']\.["']|["']trf_blocks\.|startswith\(["']trf_blocks""")
    # keymaps.py maps state-dict keys (parameter names such as trf_blocks.0.att.W_query
    # .weight) between formats: weights, not hook names
    for path, name in MODULES.items():
        if name in NODE_TABLE + KEY_MAPS:
            continue
        code = [line for line in path.read_text().splitlines()
                if not line.strip().startswith("#") and "help=" not in line]
        hits = [line.strip() for line in code if pattern.search(line)
                and not line.strip().startswith(('"', "'", "``"))]
        assert not hits, f"{name}: {hits}"


def test_modules_are_hooked_only_through_the_hook_manager():
    """One way to hook: gpt/hooks.py attaches every forward and pre-forward hook."""
    pattern = re.compile(r"register_forward_(pre_)?hook|register_full_backward")
    for path, name in MODULES.items():
        if name != "explorer.core.gpt.hooks":
            assert not pattern.search(path.read_text()), name
    from explorer.core.gpt import hooks
    assert pattern.search(inspect.getsource(hooks))


def test_views_and_what_they_draw_with_never_touch_torch():
    """Views get numpy (a Pass); a torch call on the GUI thread would share torch's
    threads with the engine's pass. Only the window sets torch's thread count."""
    for path, name in MODULES.items():
        if name.split(".")[1:3] in (["ui", "views"], ["ui", "graph"], ["ui", "plots"],
                                    ["ui", "widgets"], ["ui", "base"]):
            assert "torch" not in {m.split(".")[0] for m in imports(path)}, name


def test_no_function_is_over_60_lines():
    long = {}
    for path, name in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if (n := node.end_lineno - node.lineno + 1) > 60:
                    long[f"{name}.{node.name}"] = n
    assert not long


def test_node_names_are_written_only_in_the_node_table():
    """Every other module asks the table (its role names, its functions) for a node."""
    from explorer.core.gpt.nodes import FAMILIES
    keys = {n.key for family in FAMILIES.values() for order in family.orders.values() for n in order}
    keys |= {n.key for family in FAMILIES.values()
             for n in family.before + family.after + family.attention_inside}
    literal = re.compile(r"""["'](%s)["']""" % "|".join(re.escape(k) for k in sorted(keys)))
    for path, name in MODULES.items():
        if name in NODE_TABLE + KEY_MAPS:
            continue  # the table itself; and state-dict key maps (weights, not nodes)
        hits = [line.strip() for line in path.read_text().splitlines() if literal.search(line)]
        assert not hits, f"{name}: {hits}"


def test_the_tests_mirror_the_code():
    """tests/core/<layer>/ for each layer of explorer/core, as tests/ui/views/<workspace>/
    for each workspace: a module's tests sit in its layer's folder, none flat."""
    tests = Path(__file__).resolve().parent
    for root, layers in (("core", CORE_LAYERS), ("ui", UI_LAYERS)):
        folders = {p.name for p in (tests / root).iterdir()
                   if p.is_dir() and (p / "__init__.py").is_file()}
        flat = sorted(p.name for p in (tests / root).glob("test_*.py"))
        assert not flat, f"tests/{root} holds tests outside a layer's folder: {flat}"
        assert folders <= set(layers), f"tests/{root} has folders of no layer: {folders - set(layers)}"
    assert {p.name for p in (tests / "core").iterdir() if p.is_dir() and p.name != "__pycache__"} \
        == set(CORE_LAYERS)
    for workspace in WORKSPACES:
        assert (tests / "ui" / "views" / workspace.key).is_dir(), workspace.key


def test_kinds_are_compared_as_their_enums_not_as_words():
    """A node's kind (and an attribution part's) is one record keyed by its enum: compared
    as ``Kind.PATTERN``, never as the word "pattern", in the app and in the tests; so are
    the divergence finder's mutations and its rows' statuses."""
    words = re.compile(r"((?<!dtype)\.kind|\bmutation|(?<!session)\.status) (==|!=|in|not in) \(?[\"']")
    # numpy's dtype.kind and the status line's text aside; a mutation (Mutation) and a
    # divergence row's status (Status) too
    files = [*ROOT.rglob("*.py"), *(ROOT.parent / "tests").rglob("*.py")]
    assert len(files) > 300  # the app's modules and the tests, both read
    found = [f"{p.relative_to(ROOT.parent)}:{i}" for p in files
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if words.search(line)]
    assert not found, found
