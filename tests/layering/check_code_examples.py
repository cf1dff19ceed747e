#!/usr/bin/env python3
"""The `/// @code ... /// @endcode` examples of the public headers compile (standard library only).

Each example of include/gridshard/**/*.hpp becomes one translation unit: a few standard headers, the header it
documents, the example's own #include lines, and the example, inside a function `void example_N()` unless it
defines functions of its own (then at namespace scope). Each unit is checked with `CXX -std=c++20
-fsyntax-only -I include` plus MPI's include folders: the -I options given, else `mpicxx --showme:compile`
(Open MPI) or `mpicxx -compile-info` (MPICH). An example therefore declares what it uses, as a function's
parameters where it needs inputs.

Usage: check_code_examples.py [--root REPO] [--cxx COMPILER] [--no-wrapper] [-I DIR]...
"""

import argparse
import concurrent.futures
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

PRELUDE = ["<cstddef>", "<cstdint>", "<cstdio>", "<span>", "<string>", "<vector>"]
FUNCTION = re.compile(r"^(?!(?:for|if|while|switch|return|else|do)\b)[A-Za-z_][\w:<>,&*\s]*[\s&*]\w+\s*\(")


def examples(header):
    """(line number, lines) of each @code block of `header`, with the `///` and common indentation gone."""
    found, block, start = [], None, 0
    with open(header, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            text = line.strip()
            if not text.startswith("///"):
                if block is not None:
                    raise SystemExit(f"{header}:{start}: @code without @endcode")
                continue
            body = text[3:]
            if body.strip() == "@code":
                block, start = [], number
            elif body.strip() == "@endcode":
                lines = [b for b in block]
                indent = min((len(b) - len(b.lstrip()) for b in lines if b.strip()), default=0)
                found.append((start, [b[indent:] for b in lines]))
                block = None
            elif block is not None:
                block.append(body.rstrip())
    return found


def unit(root, header, number, lines):
    includes = [line for line in lines if line.lstrip().startswith("#include")]
    code = [line for line in lines if not line.lstrip().startswith("#include")]
    relative = os.path.relpath(header, os.path.join(root, "include"))
    text = [f"#include {h}" for h in PRELUDE] + [f'#include "{relative}"'] + includes + [f"#line {number + 1}"]
    bare = [line.split("//")[0].rstrip() for line in code]
    if any(FUNCTION.match(line) and not line.endswith(";") for line in bare) and "}" in bare:
        text += code
    else:
        text += [f"void example_{number}() {{"] + code + ["}"]
    return "\n".join(text) + "\n"


def mpi_flags():
    wrapper = shutil.which("mpicxx")
    if wrapper is None:
        return []
    for query in (["--showme:compile"], ["-compile-info"]):
        result = subprocess.run([wrapper] + query, capture_output=True, text=True)
        if result.returncode == 0 and result.stdout.strip():
            words = shlex.split(result.stdout)
            if query[0] == "-compile-info":
                words = words[1:]  # the compiler's own name comes first
            return [w for w in words if w.startswith(("-I", "-D", "-pthread"))]
    return []


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    parser.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
    parser.add_argument("-I", dest="include_dirs", action="append", default=[], help="an include folder of MPI's")
    parser.add_argument("--no-wrapper", action="store_true",
                        help="MPI's include folders are the -I given (the build's), not the mpicxx wrapper's")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    flags = [f"-I{d}" for d in args.include_dirs]
    if not args.no_wrapper and not flags:
        flags = mpi_flags()
    command = shlex.split(args.cxx) + ["-std=c++20", "-fsyntax-only", "-I", os.path.join(root, "include")] + flags

    headers = []
    for parent, dirs, files in os.walk(os.path.join(root, "include", "gridshard")):
        dirs.sort()
        headers += [os.path.join(parent, f) for f in sorted(files) if f.endswith(".hpp")]
    cases = [(h, n, lines) for h in headers for n, lines in examples(h)]
    if not cases:
        print("check_code_examples: no @code examples found", file=sys.stderr)
        return 1

    with tempfile.TemporaryDirectory() as work:
        def compile_one(case):
            header, number, lines = case
            name = os.path.join(work, f"{os.path.basename(header)[:-4]}_{number}.cpp")
            with open(name, "w", encoding="utf-8") as handle:
                handle.write(unit(root, header, number, lines))
            result = subprocess.run(command + [name], capture_output=True, text=True)
            return case, result

        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            results = list(pool.map(compile_one, cases))

    failed = 0
    for (header, number, _), result in results:
        where = f"{os.path.relpath(header, root)}:{number}"
        if result.returncode != 0:
            failed += 1
            print(f"check_code_examples: the example at {where} does not compile:\n{result.stderr}", file=sys.stderr)
    if failed:
        print(f"check_code_examples: {failed} of {len(results)} examples do not compile", file=sys.stderr)
        return 1
    print(f"check_code_examples: all {len(results)} examples compile ({' '.join(command[:1])})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
