"""What the static checks of tests/layering share: the verdict of a self-test and the command line (standard library
only)."""

import argparse
import os
import sys


def write_tree(root, files):
    """Writes `files` ({path relative to `root`: text}) under `root`, making their folders: a self-test's tree."""
    for name, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
        with open(os.path.join(root, name), "w", encoding="utf-8") as handle:
            handle.write(text)


def self_test_verdict(tool, missing, extra, reported):
    """0 when a self-test's planted problems were all reported and nothing else (printing `reported`), else 1 with
    each problem not reported (`missing`) and each reported wrongly (`extra`) on stderr."""
    if missing or extra:
        for p in missing:
            print(f"{tool} self-test: not reported: {p}", file=sys.stderr)
        for p in extra:
            print(f"{tool} self-test: reported wrongly: {p}", file=sys.stderr)
        return 1
    print(f"{tool} self-test: {reported}")
    return 0


def main(tool, description, check, self_test, passed, failed):
    """`tool [--root REPO] [--self-test]`: runs `self_test()`, or `check(root)` and prints its problems (exit status
    1, with `failed(count)`) or `passed`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(sys.argv[0])), "..", ".."))
    parser.add_argument("--self-test", action="store_true")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    problems = check(os.path.abspath(args.root))
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print(f"{tool}: {failed(len(problems))}", file=sys.stderr)
        return 1
    print(f"{tool}: {passed}")
    return 0
