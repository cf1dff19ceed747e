#!/usr/bin/env python3
"""The library's layering and the front ends' use of it (standard library only).

1. Every include edge inside the library points down. A file's layer is the folder below include/gridshard/
   or src/; an edge is an `#include "gridshard/<layer>/..."` (or <...>) or a quoted include that resolves,
   relative to the including file, to a private header in src/<layer>/. A layer may include itself and the
   layers in LAYERS below. A layer folder not declared in LAYERS is an error, so a new layer is declared here.
2. The front ends (apps/, python/; C++ files only) use the public API: no `gridshard::detail` or `detail::`
   outside comments and string literals, and no private header of src/.
3. The umbrella header include/gridshard/gridshard.hpp includes every public header, so the consumer test, which
   compiles it from the installed tree, sees them all.
4. No source file of the library, the tool or the Python package (src/, include/, apps/, python/: C++ and Python)
   is longer than MAX_LINES lines: a file that grows past it does several things and is split along them.
5. The library's string literals (src/, include/) name no flag of a front end ("--vars"): a message names the
   setting (setting_name in core/error.hpp) and each front end shows its own name for it.

Usage: check_layers.py [--root REPO]    (exit status 1 with each offending file:line on stderr)
       check_layers.py --self-test      (builds a small tree with one violation of each kind and checks both
                                         are reported)
"""

import os
import re
import sys
import tempfile

from check_support import main as run_check, self_test_verdict, write_tree

# Each layer and the layers it may include (besides itself).
LAYERS = {
    "core": set(),
    "numerics": {"core"},
    "geometry": {"core", "numerics"},
    "comm": {"core", "numerics", "geometry"},  # numerics: the exact allreduce (comm/exact_allreduce.hpp)
    "io": {"core", "numerics", "geometry", "comm"},
    "metrics": {"core", "numerics", "geometry", "comm"},
    "evaluation": {"core", "numerics", "geometry", "comm", "io", "metrics"},
}
# include/gridshard/gridshard.hpp includes every layer; it is for the front ends only.
UMBRELLA = "gridshard.hpp"
FRONT_ENDS = ("apps", "python")
CPP_SUFFIXES = (".cpp", ".hpp", ".h", ".cc")
MAX_LINES = 800
SIZED = ("src", "include", "apps", "python")

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
DETAIL = re.compile(r"\b(?:gridshard\s*::\s*)?detail\s*::")
STRING_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
FLAG = re.compile(r"(?:^|[\s('\[])--[a-z]")


def cpp_files(folder):
    for parent, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(CPP_SUFFIXES):
                yield os.path.join(parent, name)


def code_lines(text, keep_literals=False):
    """The lines of `text` with comments blanked, and string and character literals too unless `keep_literals`
    (line numbers kept)."""
    out, i, n = [], 0, len(text)
    state = None  # None, "line", "block", '"', "'"
    raw_end = None
    while i < n:
        c = text[i]
        if state is None:
            if text.startswith("//", i):
                state = "line"
                i += 2
                continue
            if text.startswith("/*", i):
                state = "block"
                i += 2
                continue
            raw = re.match(r'R"([^(\s]{0,16})\(', text[i:i + 20])
            if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
                raw_end = ")" + raw.group(1) + '"'
                state = "raw"
                i += raw.end()
                continue
            if c in "\"'":
                state = c
            out.append(c)
        elif state == "line":
            if c == "\n":
                state = None
                out.append(c)
        elif state == "block":
            if text.startswith("*/", i):
                state = None
                i += 2
                continue
            if c == "\n":
                out.append(c)
        elif state == "raw":
            if text.startswith(raw_end, i):
                state = None
                i += len(raw_end)
                continue
            if c == "\n":
                out.append(c)
        else:  # inside a string or character literal
            if c == "\\" and i + 1 < n:
                if keep_literals:
                    out.append(text[i:i + 2])
                i += 2
                continue
            if keep_literals and c != state and c != "\n":
                out.append(c)
            if c == state or c == "\n":
                state = None
                out.append(c)
        i += 1
    return "".join(out).split("\n")


def includes(path):
    """(line number, bracket, target) of each #include of `path`."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            match = INCLUDE.match(line)
            if match:
                yield number, match.group(1), match.group(2)


def inside(path, folder):
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return os.path.commonpath([path, folder]) == folder


def check(root):
    """The problems of the tree at `root`, each a line 'file:line: message'."""
    problems = []
    include_dir = os.path.join(root, "include", "gridshard")
    src_dir = os.path.join(root, "src")

    def layer_of_private(path):
        """The layer of a resolved path under src/, or None."""
        if not inside(path, src_dir):
            return None
        parts = os.path.relpath(os.path.realpath(path), os.path.realpath(src_dir)).split(os.sep)
        return parts[0] if len(parts) > 1 else ""

    def rel(path):
        return os.path.relpath(path, root)

    # 1. The library's own edges.
    for top in (include_dir, src_dir):
        if not os.path.isdir(top):
            continue
        for path in cpp_files(top):
            parts = os.path.relpath(path, top).split(os.sep)
            if len(parts) == 1:
                if top == include_dir and parts[0] == UMBRELLA:
                    continue  # the umbrella header may include every layer
                problems.append(f"{rel(path)}:1: lies in no layer folder of {rel(top)}/")
                continue
            layer = parts[0]
            if layer not in LAYERS:
                problems.append(f"{rel(path)}:1: unknown layer '{layer}' (declare it in LAYERS of "
                                f"tests/layering/check_layers.py)")
                continue
            allowed = LAYERS[layer] | {layer}
            for number, bracket, target in includes(path):
                target_layer = None
                if target == "gridshard/" + UMBRELLA:
                    problems.append(f"{rel(path)}:{number}: layer '{layer}' includes the umbrella header {target}")
                    continue
                if target.startswith("gridshard/"):
                    pieces = target.split("/")
                    target_layer = pieces[1] if len(pieces) > 2 else ""
                elif bracket == '"':
                    resolved = os.path.join(os.path.dirname(path), target)
                    if os.path.exists(resolved):
                        target_layer = layer_of_private(resolved)
                        if target_layer is None and inside(resolved, include_dir):
                            pieces = os.path.relpath(os.path.realpath(resolved),
                                                     os.path.realpath(include_dir)).split(os.sep)
                            target_layer = pieces[0] if len(pieces) > 1 else ""
                if target_layer is None:
                    continue
                if target_layer not in LAYERS:
                    problems.append(f"{rel(path)}:{number}: includes {target} of unknown layer '{target_layer}'")
                elif target_layer not in allowed:
                    problems.append(f"{rel(path)}:{number}: upward include: layer '{layer}' includes {target} "
                                    f"(layer '{target_layer}'); '{layer}' may include "
                                    f"{', '.join(sorted(allowed)) or 'only itself'}")

    # 3. The umbrella header is complete.
    umbrella = os.path.join(include_dir, UMBRELLA)
    if os.path.isfile(umbrella):
        included = {target for _, _, target in includes(umbrella)}
        for path in cpp_files(include_dir):
            name = "gridshard/" + os.path.relpath(path, include_dir).replace(os.sep, "/")
            if name != "gridshard/" + UMBRELLA and name not in included:
                problems.append(f"{rel(umbrella)}:1: the umbrella header omits the public header {name}")

    # 4. No file too long.
    for top in SIZED:
        for parent, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(CPP_SUFFIXES + (".py",)):
                    path = os.path.join(parent, name)
                    with open(path, encoding="utf-8", errors="replace") as handle:
                        lines = sum(1 for _ in handle)
                    if lines > MAX_LINES:
                        problems.append(f"{rel(path)}:{lines}: {lines} lines, more than {MAX_LINES}: split it along "
                                        f"its concerns")

    # 5. No flag in the library's messages.
    for top in (include_dir, src_dir):
        for path in cpp_files(top) if os.path.isdir(top) else ():
            with open(path, encoding="utf-8", errors="replace") as handle:
                lines = code_lines(handle.read(), keep_literals=True)
            for number, line in enumerate(lines, 1):
                for literal in STRING_LITERAL.findall(line):
                    if FLAG.search(literal):
                        problems.append(f"{rel(path)}:{number}: a library string names a flag (\"{literal}\"); name "
                                        f"the setting with setting_name() and let the front end show its flag")

    # 2. The front ends.
    for front in FRONT_ENDS:
        folder = os.path.join(root, front)
        if not os.path.isdir(folder):
            continue
        for path in cpp_files(folder):
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
            original = text.split("\n")
            for number, line in enumerate(code_lines(text), 1):
                if DETAIL.search(line):
                    problems.append(f"{rel(path)}:{number}: front end uses the library's internals: "
                                    f"{original[number - 1].strip()}")
            for number, bracket, target in includes(path):
                candidates = [os.path.join(src_dir, target), os.path.join(root, target)]
                if bracket == '"':
                    local = os.path.join(os.path.dirname(path), target)
                    if os.path.exists(local):
                        candidates = [local]
                    elif os.path.exists(os.path.join(root, "include", target)):
                        continue
                for candidate in candidates:
                    if os.path.isfile(candidate) and inside(candidate, src_dir):
                        problems.append(f"{rel(path)}:{number}: front end includes the private header "
                                        f"{rel(os.path.realpath(candidate))}")
                        break
    return problems


def self_test():
    files = {
        "include/gridshard/core/error.hpp": "#pragma once\n",
        # The umbrella header, which omits one public header (core/bad.hpp).
        "include/gridshard/gridshard.hpp": '#pragma once\n#include "gridshard/core/error.hpp"\n'
                                           '#include "gridshard/numerics/sum.hpp"\n',
        "include/gridshard/numerics/sum.hpp": '#pragma once\n#include "gridshard/core/error.hpp"\n',
        # The upward arrow: core includes numerics.
        "include/gridshard/core/bad.hpp": '#pragma once\n#include "gridshard/numerics/sum.hpp"\n',
        "src/numerics/sum.cpp": '#include "gridshard/numerics/sum.hpp"\n#include "helper.hpp"\n',
        "src/numerics/helper.hpp": "#pragma once\n",
        # A flag in a library message; the same in a comment is fine.
        "src/numerics/flag.cpp": '// --vars in a comment\nauto m = std::string("--vars: no") + "x";\n',
        # A file too long.
        "src/numerics/long.cpp": "\n" * (MAX_LINES + 1),
        # Fine: a comment and a string that name detail::, a public include.
        "apps/tool/ok.cpp": '#include "gridshard/numerics/sum.hpp"\n// detail::x in a comment\n'
                            'const char* s = "detail::y";\n',
        # The front end's use of the internals.
        "apps/tool/main.cpp": '#include "gridshard/numerics/sum.hpp"\n\nint main() { gridshard::detail::f(); }\n',
    }
    with tempfile.TemporaryDirectory() as root:
        write_tree(root, files)
        problems = check(root)
        expected = ["include/gridshard/core/bad.hpp:2: upward include", "apps/tool/main.cpp:3: front end uses",
                    "include/gridshard/gridshard.hpp:1: the umbrella header omits the public header "
                    "gridshard/core/bad.hpp", f"src/numerics/long.cpp:{MAX_LINES + 1}: {MAX_LINES + 1} lines",
                    "src/numerics/flag.cpp:2: a library string names a flag"]
        missing = [e for e in expected if not any(p.startswith(e) for p in problems)]
        extra = [p for p in problems if not any(p.startswith(e) for e in expected)]
        # A private header and an unknown layer are reported too.
        with open(os.path.join(root, "apps/tool/main.cpp"), "a", encoding="utf-8") as handle:
            handle.write('#include "numerics/helper.hpp"\n')
        os.makedirs(os.path.join(root, "src/extra"))
        with open(os.path.join(root, "src/extra/x.cpp"), "w", encoding="utf-8") as handle:
            handle.write("\n")
        second = check(root)
        for e in ["apps/tool/main.cpp:4: front end includes the private header", "src/extra/x.cpp:1: unknown layer"]:
            if not any(p.startswith(e) for p in second):
                missing.append(e)
    return self_test_verdict("check_layers", missing, extra,
                             "the upward include, the detail:: use, the private header, the unknown layer, the "
                             "umbrella header's omission, the file too long and the flag in a library string are "
                             "reported")


def main():
    return run_check("check_layers", __doc__.split("\n")[0], check, self_test,
                     "every include points down; the front ends use the public API only; the umbrella header is "
                     f"complete; no file is longer than {MAX_LINES} lines; no library string names a flag",
                     lambda n: f"{n} problem(s)")


if __name__ == "__main__":
    sys.exit(main())
