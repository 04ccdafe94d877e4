#!/usr/bin/env python3
"""Fails when worker_lib's folders include each other in a cycle.

Reads every #include "..." line under worker_lib/ and draws an edge from the including file's
folder to the included file's folder. The component's root counts as two nodes: its headers
(the interfaces every folder meets at: backend.h, round_agreement.h, ...) and its sources (the
public API's implementation, which sits on top of the runtime). Prints each cycle with the
files that make its edges.

Usage: check_include_cycles.py <source root>
"""
import os
import re
import sys

INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"')


def node(root, path):
    rel = os.path.relpath(path, root)
    folder = os.path.dirname(rel)
    if folder == "worker_lib":
        return "worker_lib/*.h" if rel.endswith(".h") else "worker_lib/*.cc"
    return folder


def edges_of(root):
    edges = {}
    for directory, _, files in os.walk(os.path.join(root, "worker_lib")):
        for name in files:
            if not name.endswith((".h", ".cc", ".cu", ".inc")):
                continue
            path = os.path.join(directory, name)
            source = node(root, path)
            with open(path, errors="ignore") as f:
                for line in f:
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    included = m.group(1)
                    if included.startswith("worker_lib/"):
                        target = node(root, os.path.join(root, included))
                    elif os.path.exists(os.path.join(directory, included)):
                        target = node(root, os.path.join(directory, included))
                    else:
                        continue  # generated, common/, third-party, public headers by <hvrun/>
                    if target != source:
                        edges.setdefault(source, {}).setdefault(target, set()).add(
                            os.path.relpath(path, root))
    return edges


def cycles(edges):
    """Strongly connected components of more than one folder (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    nodes = set(edges) | {w for targets in edges.values() for w in targets}
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return found


def main():
    root = sys.argv[1]
    edges = edges_of(root)
    found = cycles(edges)
    for component in found:
        print("include cycle among: " + ", ".join(component))
        for a in component:
            for b in component:
                if b in edges.get(a, {}):
                    print(f"  {a} -> {b}: " + ", ".join(sorted(edges[a][b])))
    if found:
        return 1
    print(f"no include cycle among worker_lib's {len(set(edges))} folders")
    return 0


if __name__ == "__main__":
    sys.exit(main())
