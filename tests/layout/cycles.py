"""No two parts of a folder use each other, directly or through others.

A unit is what the rules reason about: a C/C++ folder (its files are built and read together)
or one Python module. At each folder of the tree, its parts are its child folders (each with
everything below it) and its own units; a use between units is an edge between the two parts
of the deepest folder holding both. A cycle at any folder means neither part can be understood,
built or replaced without the other: worker_lib/runtime and worker_lib/backends tied by an
include each way (runtime/x.h -> backends/shm/y.h -> runtime/z.h) is one, though no two leaf
folders include each other.
"""

import os
from collections import defaultdict


def parts_of(unit_a, unit_b):
    """(folder, part of a, part of b): the deepest folder holding both units and the part of it
    each lies in (a unit that is the folder itself is its own part); None for one unit."""
    a, b = unit_a.split("/"), unit_b.split("/")
    common = 0
    while common < min(len(a), len(b)) and a[common] == b[common]:
        common += 1
    if common == len(a) and common == len(b):
        return None
    folder = "/".join(a[:common])
    part_a = "/".join(a[:common + 1])
    part_b = "/".join(b[:common + 1])
    return folder, part_a, part_b


def part_graphs(uses, unit_of):
    """graphs[folder][part a][part b] = [uses from a into b]."""
    graphs = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for use in uses:
        found = parts_of(unit_of(use.path), unit_of(use.target))
        if found:
            folder, a, b = found
            graphs[folder][a][b].append(use)
    return graphs


def strongly_connected(edges):
    """Tarjan's algorithm, iterative; components of more than one node, each sorted."""
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


def cycles(uses, unit_of, lines_per_edge=3):
    """One message per cycle, naming its parts and every use that ties them."""
    messages = []
    graphs = part_graphs(uses, unit_of)
    for folder in sorted(graphs):
        edges = graphs[folder]
        for component in strongly_connected(edges):
            members = set(component)
            shown = [p + (" (its own files)" if p == folder else "") for p in component]
            lines = [f"rule 'no cycle': the parts of {folder or '/'} use each other: "
                     + ", ".join(shown)]
            for a in component:
                for b in sorted(edges.get(a, {})):
                    if b not in members:
                        continue
                    found = edges[a][b]
                    lines.append(f"  {a} -> {b}:")
                    for use in found[:lines_per_edge]:
                        lines.append(f"    {use.path}:{use.line}: {use.text}")
                    if len(found) > lines_per_edge:
                        lines.append(f"    (+{len(found) - lines_per_edge} more)")
            messages.append("\n".join(lines))
    return messages


def cxx_unit(path):
    return os.path.dirname(path)


def python_unit(path):
    return path
