"""The repository's files and what each uses: C and C++ `#include "..."` lines and Python
imports, each resolved to the repository file it reads.

A use is one line of one file naming another file of the repository. Includes of system or
generated headers and imports of other distributions (tensorflow, torch) name no file here
and are left out.
"""

import ast
import os
import re
import subprocess
from dataclasses import dataclass

CXX_SUFFIXES = (".h", ".cc", ".cu", ".c")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


@dataclass(frozen=True)
class Use:
    path: str    # the file that uses
    line: int    # where (1-based)
    text: str    # the line, stripped
    target: str  # the file it reads


def tracked_files(root):
    """Every file of the repository (git's list; every file below `root` when it is not a
    git checkout, such as an unpacked source archive or a test's fixture)."""
    try:
        listed = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True,
                                capture_output=True).stdout.decode().split("\0")
        listed = [p for p in listed if p]
        if listed:
            return sorted(listed)
    except (OSError, subprocess.CalledProcessError):
        pass
    listed = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("build")]
        listed += [os.path.relpath(os.path.join(folder, f), root) for f in files]
    return sorted(listed)


def _lines(root, path):
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        return f.read().splitlines()


def include_uses(root, files, include_dirs):
    """The includes of every C/C++ source. A quoted include is looked for beside the including
    file, then at the root, then in `include_dirs` (folders the build adds to the path), as the
    compiler does."""
    known = set(files)
    uses = []
    for path in files:
        if not path.endswith(CXX_SUFFIXES):
            continue
        for number, text in enumerate(_lines(root, path), 1):
            match = INCLUDE.match(text)
            if not match:
                continue
            name = match.group(1)
            candidates = [os.path.normpath(os.path.join(os.path.dirname(path), name)), name]
            candidates += [os.path.join(d, name) for d in include_dirs]
            target = next((c for c in candidates if c in known), None)
            if target is not None and target != path:
                uses.append(Use(path, number, text.strip(), target))
    return uses


def _module_file(known, python_root, dotted):
    """The file of module `dotted` (a package's __init__.py), or None."""
    base = os.path.join(python_root, *dotted.split("."))
    for candidate in (base + ".py", os.path.join(base, "__init__.py")):
        if candidate in known:
            return candidate
    return None


def _package_of(path, python_root):
    """The dotted package a module file belongs to (for relative imports)."""
    folder = os.path.relpath(os.path.dirname(path), python_root)
    return "" if folder == "." else folder.replace(os.sep, ".")


def _bound_names(root, init_file):
    """The names a package's __init__.py binds at its top level (in its `if` and `try` blocks
    too); None when it star-imports (then any name may be bound)."""
    tree = ast.parse("\n".join(_lines(root, init_file)), filename=init_file)
    bound = set()
    statements = list(tree.body)
    while statements:
        node = statements.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                bound |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.name == "*":
                    return None
                bound.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            statements += node.body + getattr(node, "orelse", []) + getattr(node, "finalbody", [])
            for handler in getattr(node, "handlers", []):
                statements += handler.body
    return bound


def import_uses(root, files, python_root, extensions=()):
    """The imports of every Python module under `python_root`, wherever they stand (a function's
    import inside is a dependency as much as one at the top). `from p import name` reads the
    module p.name when there is one, else p itself (an object its __init__.py defines). Compiled
    extension modules (`extensions`: hvrun._core) are no file here: their imports are left out."""
    known = set(files)
    bound = {}

    def binds(package_file, name):
        if package_file not in bound:
            bound[package_file] = _bound_names(root, package_file)
        names = bound[package_file]
        return names is None or name in names

    uses = []
    prefix = python_root.rstrip("/") + "/"
    for path in files:
        if not (path.startswith(prefix) and path.endswith(".py")):
            continue
        lines = _lines(root, path)
        tree = ast.parse("\n".join(lines), filename=path)
        package = _package_of(path, python_root)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".") if package else []
                    parts = parts[:len(parts) - (node.level - 1)]
                    base = ".".join(parts + ([base] if base else []))
                package_file = _module_file(known, python_root, base)
                names = []
                for alias in node.names:
                    name = f"{base}.{alias.name}" if base else alias.name
                    if name in extensions:
                        continue
                    if _module_file(known, python_root, name):
                        names.append(name)
                    elif package_file and (alias.name == "*" or binds(package_file, alias.name)):
                        names.append(base)
            else:
                continue
            for name in dict.fromkeys(names):
                target = _module_file(known, python_root, name)
                if target is not None and target != path:
                    uses.append(Use(path, node.lineno, lines[node.lineno - 1].strip(), target))
    return uses
