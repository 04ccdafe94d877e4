#!/usr/bin/env python3
"""No two source folders include each other, directly or through others.

A folder is a directory holding tracked sources (.h, .cc, .cu, .c), e.g. worker_lib/runtime or
coordinator/service. Every `#include "..."` that names a file of the repository is an edge from
the including file's folder to the included file's folder. A cycle between folders means
neither can be understood, built or replaced without the other; this check lists every group
of folders that reach each other (a strongly connected component) with the include lines that
tie them, and exits 1 when there is one.

    check_include_cycles.py SOURCE_DIR
"""

import os
import re
import subprocess
import sys
from collections import defaultdict

SOURCE_SUFFIXES = (".h", ".cc", ".cu", ".c")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
# Folders that the build puts on the include path besides the repository's root, searched
# after it, as the compiler does for a quoted include that is not beside the including file.
EXTRA_INCLUDE_DIRS = ("worker_lib/include",)
LINES_SHOWN_PER_EDGE = 3


def tracked_sources(root):
    try:
        listed = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                                capture_output=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        # Not a git checkout (an unpacked source archive): every file below the root.
        listed = []
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("build")]
            listed += [os.path.relpath(os.path.join(folder, f), root) for f in files]
    return sorted(p for p in listed if p.endswith(SOURCE_SUFFIXES))


def resolve(root, including, name, known):
    """The repository path that `#include "name"` in `including` reads, or None (system or
    generated header)."""
    candidates = [os.path.normpath(os.path.join(os.path.dirname(including), name)), name]
    candidates += [os.path.join(d, name) for d in EXTRA_INCLUDE_DIRS]
    for c in candidates:
        if c in known:
            return c
    return None


def folder_graph(root, sources):
    """edges[a][b] = [(file, line number, line text)] for each include from folder a into b."""
    known = set(sources)
    edges = defaultdict(lambda: defaultdict(list))
    for path in sources:
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            for number, text in enumerate(f, 1):
                match = INCLUDE.match(text)
                if not match:
                    continue
                target = resolve(root, path, match.group(1), known)
                if target is None:
                    continue
                a, b = os.path.dirname(path), os.path.dirname(target)
                if a != b:
                    edges[a][b].append((path, number, text.strip()))
    return edges


def strongly_connected(edges):
    """Tarjan's algorithm, iterative; components of more than one folder, each sorted."""
    nodes = sorted(set(edges) | {b for a in edges for b in edges[a]})
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, {}))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, {})))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def report(component, edges):
    lines = ["cycle between " + ", ".join(component) + ":"]
    members = set(component)
    mutual = [f"{a} <-> {b}" for a in component for b in component
              if a < b and b in edges.get(a, {}) and a in edges.get(b, {})]
    if mutual:
        lines.append("  folders that include each other directly: " + ", ".join(mutual))
    for a in component:
        for b in sorted(edges.get(a, {})):
            if b not in members:
                continue
            includes = edges[a][b]
            lines.append(f"  {a} -> {b} ({len(includes)} include{'s' if len(includes) > 1 else ''})")
            for path, number, text in includes[:LINES_SHOWN_PER_EDGE]:
                lines.append(f"    {path}:{number}: {text}")
            if len(includes) > LINES_SHOWN_PER_EDGE:
                lines.append(f"    (+{len(includes) - LINES_SHOWN_PER_EDGE} more)")
    return "\n".join(lines)


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    root = argv[1]
    sources = tracked_sources(root)
    edges = folder_graph(root, sources)
    cycles = strongly_connected(edges)
    folders = {os.path.dirname(p) for p in sources}
    if cycles:
        print(f"FAIL: {len(cycles)} include cycle(s) between folders "
              "(move the shared piece to the folder it belongs to, or depend on an interface):")
        for component in cycles:
            print(report(component, edges))
        return 1
    print(f"PASS: {len(sources)} sources in {len(folders)} folders, no include cycle between folders")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
