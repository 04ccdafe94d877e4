"""The layering rules, read from the tables of a Markdown file (docs/layers.md).

A components table has the columns `component | folder | may use` (C and C++ folders) or
`package | folder | may use` (Python packages): every file below the folder belongs to the
component (the deepest listed folder wins), and its files may use files of the components named
in the third column ("—" for none) and of their own component, nothing else.
A table whose first column is `installed headers` lists folders of headers installed for users:
they stand apart from their code by design. One whose first column is `extension module` names
the Python modules compiled from C++ (no Python file to follow).
"""

import os
from dataclasses import dataclass, field

NONE = {"", "-", "—", "none"}


@dataclass
class Component:
    name: str
    folder: str           # "worker_lib/", "python/hvrun/torch/"
    may_use: list
    line: int             # where its row is in the rules file
    python: bool = False  # a Python package (its name is its dotted module name)


@dataclass
class Rules:
    path: str
    components: dict = field(default_factory=dict)   # name -> Component
    installed_headers: list = field(default_factory=list)
    extension_modules: list = field(default_factory=list)

    def component_of(self, path):
        best = None
        for c in self.components.values():
            if path.startswith(c.folder) and (best is None or len(c.folder) > len(best.folder)):
                best = c
        return best

    def python_roots(self):
        """The folders Python packages are imported from ("python/" for python/hvrun/)."""
        return sorted({c.folder[:len(c.folder) - len(c.name.replace(".", "/")) - 1]
                       for c in self.components.values() if c.python})

    def is_installed_header(self, path):
        return any(path.startswith(folder) for folder in self.installed_headers)


def _cells(line):
    return [c.strip().strip("`").strip() for c in line.strip().strip("|").split("|")]


def _folder(cell):
    return cell.rstrip("/") + "/"


def read_rules(path, display_path):
    """The rules of `path`; raises ValueError naming the line of a malformed or unknown entry."""
    rules = Rules(display_path)
    header = None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.lstrip().startswith("|"):
                header = None
                continue
            cells = _cells(line)
            if header is None:
                header = [c.lower() for c in cells]
                continue
            if all(set(c) <= set("-: ") for c in cells):
                continue
            where = f"{display_path}:{number}"
            if header[1:3] == ["folder", "may use"] and header[0] in ("component", "package"):
                name, folder, uses = cells[:3]
                may_use = [u.strip().strip("`") for u in uses.split(",")]
                may_use = [u for u in may_use if u.lower() not in NONE]
                if name in rules.components:
                    raise ValueError(f"{where}: component {name} listed twice")
                python = header[0] == "package"
                folder = _folder(folder)
                if python and not folder.endswith("/" + name.replace(".", "/") + "/"):
                    raise ValueError(f"{where}: package {name} is not in a folder of its name")
                rules.components[name] = Component(name, folder, may_use, number, python)
            elif header[:1] == ["installed headers"]:
                rules.installed_headers.append(_folder(cells[0]))
            elif header[:1] == ["extension module"]:
                rules.extension_modules.append(cells[0])
            else:
                raise ValueError(f"{where}: a table this check does not know (columns "
                                 f"{' | '.join(header)})")
    if not rules.components:
        raise ValueError(f"{display_path}: no components table")
    for c in rules.components.values():
        for used in c.may_use:
            if used not in rules.components:
                raise ValueError(f"{display_path}:{c.line}: {c.name} may use {used}, "
                                 "which is no component")
    return rules


def layer_violations(rules, uses):
    """A message for each use of a component that its row does not allow (or of a file that
    belongs to no component)."""
    messages = []
    for use in uses:
        user = rules.component_of(use.path)
        if user is None:
            continue
        used = rules.component_of(use.target)
        if used is not None and (used is user or used.name in user.may_use):
            continue
        allowed = ", ".join(user.may_use) or "no other component"
        what = f"component {used.name}" if used else "a file of no component"
        messages.append(
            f"{use.path}:{use.line}: {use.text}\n"
            f"  rule '{user.name} may use {allowed}' ({rules.path}:{user.line}): "
            f"{use.target} is {what}")
    return messages


def misplaced_headers(rules, files):
    """A message for each header away from its code: x.h with no x.cc (.cu, .c) beside it while
    its component has one in another folder with no x.h of its own (an x.cc beside its own x.h
    implements that header: an interface's implementation, as tcp/pair.h under pair.h).
    Installed headers are exempt."""
    known = set(files)
    sources = {}
    for path in files:
        stem, suffix = os.path.splitext(path)
        if suffix in (".cc", ".cu", ".c"):
            sources.setdefault(os.path.basename(stem), []).append(path)
    messages = []
    for path in files:
        stem, suffix = os.path.splitext(path)
        component = rules.component_of(path)
        if suffix != ".h" or component is None or rules.is_installed_header(path):
            continue
        folder, name = os.path.dirname(path), os.path.basename(stem)
        candidates = [s for s in sources.get(name, []) if rules.component_of(s) is component
                      and os.path.join(os.path.dirname(s), name + ".h") not in known]
        if not candidates or any(os.path.dirname(s) == folder for s in candidates):
            continue
        messages.append(f"{path}:1: its code is {', '.join(candidates)}\n"
                        f"  rule 'a header lives beside its code' ({rules.path})")
    return messages
