#!/usr/bin/env python3
"""No import circle in the Python package python/gridshard (standard library only).

Every import of a module of the package by another is an edge: `from . import x`, `from .x import y`,
`from .. import x`, `import gridshard.x` and `from gridshard.x import y`, at module level or inside a function (an
import deferred into a function still ties the two modules together). `from .x import y` is an edge to `x`, and to
`x.y` when that is a module; `from . import y` to `y` when it is a module (the compiled `_gridshard` included), else
to the package itself (its __init__). A circle of edges is an error, reported with the file:line of each import.

Usage: check_imports.py [--root REPO]    (exit status 1 with each circle on stderr)
       check_imports.py --self-test      (builds a small package with a circle through a deferred import and one
                                          through a package's __init__, and checks both are reported)
"""

import ast
import os
import sys
import tempfile

from check_support import main as run_check, self_test_verdict, write_tree

PACKAGE = "gridshard"
# Compiled modules of the package: imported like the others, importing none of them.
COMPILED = ("gridshard._gridshard",)


def modules(folder):
    """{module name: path} of every .py file under ``folder`` (the package ``PACKAGE``)."""
    found = {}
    for parent, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            parts = [PACKAGE] + os.path.relpath(os.path.join(parent, name), folder)[:-3].split(os.sep)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = os.path.join(parent, name)
    return found


def edges(name, path, known):
    """(imported module, line) of every import in the module ``name`` of another module in ``known``."""
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names if alias.name in known]
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level == 0:
            target = node.module
        else:
            parts = package.split(".")
            base = parts[: len(parts) - node.level + 1]  # level 1: this package, 2: the one above, ...
            target = ".".join(base + ([node.module] if node.module else []))
        if target not in known:
            continue
        submodules = [f"{target}.{alias.name}" for alias in node.names if f"{target}.{alias.name}" in known]
        out += [(module, node.lineno) for module in submodules]
        if node.module or len(submodules) < len(node.names):  # a name of the module itself
            out.append((target, node.lineno))
    return [(target, line) for target, line in out if target != name]


def circles(graph):
    """Each strongly connected set of more than one module (Tarjan's algorithm), as the modules of one circle
    through them, in order, the first one again at the end."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, {})):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            members = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                members.append(member)
                if member == node:
                    break
            if len(members) > 1:
                found.append(_one_circle(graph, set(members)))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _one_circle(graph, members):
    """A circle through the first of ``members`` (sorted), within them: a breadth-first path back to it."""
    start = min(members)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in sorted(graph.get(node, {})):
            if target == start:
                return paths[node] + [start]
            if target in members and target not in paths:
                paths[target] = paths[node] + [target]
                queue.append(target)
    return sorted(members)


def check(root):
    folder = os.path.join(root, "python", PACKAGE)
    known = modules(folder)
    known.update({name: None for name in COMPILED})
    graph, where = {}, {}
    for name, path in known.items():
        if path is None:
            continue
        for target, line in edges(name, path, known):
            graph.setdefault(name, {})
            graph[name].setdefault(target, line)
            where[name] = os.path.relpath(path, root)
    problems = []
    for circle in circles(graph):
        steps = [f"{where[a]}:{graph[a][b]} ({a} imports {b})" for a, b in zip(circle, circle[1:])]
        problems.append("import circle " + " -> ".join(circle) + ": " + "; ".join(steps))
    return problems


def self_test():
    files = {
        "python/gridshard/__init__.py": "from .a import f\n",
        # a imports b at module level, b imports a inside a function: a circle all the same.
        "python/gridshard/a.py": "from . import b\n\n\ndef f():\n    return b\n",
        "python/gridshard/b.py": "def g():\n    from .a import f\n    return f\n",
        # Fine: a subpackage module that imports a sibling and the package above.
        "python/gridshard/sub/__init__.py": "from .one import h\n",
        "python/gridshard/sub/one.py": "from .. import c\nfrom .two import k\n\n\ndef h():\n    return c, k\n",
        "python/gridshard/sub/two.py": "k = 1\n",
        "python/gridshard/c.py": "import os\n",
        # A module that imports its own package's __init__, which imports it.
        "python/gridshard/pkg/__init__.py": "from .three import m\n",
        "python/gridshard/pkg/three.py": "from . import helper\n\nm = 1\n",
    }
    with tempfile.TemporaryDirectory() as root:
        write_tree(root, files)
        problems = check(root)
    expected = ["import circle gridshard.a -> gridshard.b -> gridshard.a",
                "import circle gridshard.pkg -> gridshard.pkg.three -> gridshard.pkg"]
    missing = [e for e in expected if not any(p.startswith(e) for p in problems)]
    extra = [p for p in problems if not any(p.startswith(e) for e in expected)]
    return self_test_verdict("check_imports", missing, extra,
                             "the circle through a deferred import and the one through a package's __init__ are "
                             "reported")


def main():
    return run_check("check_imports", __doc__.split("\n")[0], check, self_test,
                     f"no import circle in python/{PACKAGE}", lambda n: f"{n} circle(s)")


if __name__ == "__main__":
    sys.exit(main())
