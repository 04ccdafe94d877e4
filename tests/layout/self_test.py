#!/usr/bin/env python3
"""check_layers.py fails on each kind of violation and passes on a tree that keeps its rules.

Each case writes a small tree into a temporary folder (not a git checkout: every file below it
is read), runs the checker on it and looks for the file, line and rule it must name.
"""

import os
import subprocess
import sys
import tempfile
import textwrap

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_layers.py")

RULES = """\
| component | folder  | may use |
|-----------|---------|---------|
| base      | `base/` | —       |
| lib       | `lib/`  | base    |
| app       | `app/`  | base, lib |

| package   | folder        | may use |
|-----------|---------------|---------|
| pkg       | `py/pkg/`     | —       |
| pkg.sub   | `py/pkg/sub/` | pkg     |

| extension module |
|------------------|
| pkg._ext         |
"""

CLEAN = {
    "docs/layers.md": RULES,
    "base/status.h": "#pragma once\n",
    "base/status.cc": '#include "base/status.h"\n',
    "lib/engine.h": '#include "base/status.h"\n',
    "lib/impl/engine.cc": '#include "lib/engine.h"\n',
    "lib/impl/engine.h": "",
    "app/main.cc": '#include "lib/engine.h"\n#include "base/status.h"\n',
    "py/pkg/__init__.py": "from pkg import _ext\nfrom pkg.core import run\n",
    "py/pkg/core.py": "import os\n\n\ndef run():\n    return os.getpid()\n",
    "py/pkg/sub/__init__.py": "from pkg import run\nfrom pkg.sub.tool import use\n",
    "py/pkg/sub/tool.py": "def use():\n    from pkg.core import run\n    return run()\n",
}


def check(tree):
    with tempfile.TemporaryDirectory() as root:
        for path, text in tree.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        done = subprocess.run([sys.executable, CHECKER, root], capture_output=True, text=True)
        return done.returncode, done.stdout + done.stderr


def with_changes(**changes):
    tree = dict(CLEAN)
    tree.update({path.replace("__", "/").replace("_DOT_", "."): text
                 for path, text in changes.items()})
    return tree


CASES = [
    ("a clean tree", CLEAN, 0, ["PASS"]),
    ("a lower component includes a higher one",
     with_changes(base__status_DOT_cc='#include "base/status.h"\n#include "app/main.cc"\n'), 1,
     ["base/status.cc:2: #include \"app/main.cc\"", "rule 'base may use no other component'",
      "docs/layers.md:3", "app/main.cc is component app"]),
    ("a component includes one its row does not list",
     with_changes(lib__impl__engine_DOT_cc='#include "lib/engine.h"\n\n#include "app/x.h"\n',
                  app__x_DOT_h=""), 1,
     ["lib/impl/engine.cc:3: #include \"app/x.h\"", "rule 'lib may use base'"]),
    ("two folders of one component include each other through their subfolders",
     with_changes(lib__a__one_DOT_h='#include "lib/b/deep/two.h"\n',
                  lib__b__deep__two_DOT_h="", lib__b__three_DOT_h='#include "lib/a/one.h"\n'), 1,
     ["rule 'no cycle': the parts of lib use each other: lib/a, lib/b",
      "lib/a/one.h:1: #include \"lib/b/deep/two.h\"", "lib/b/three.h:1: #include \"lib/a/one.h\""]),
    ("a package imports a higher one inside a function",
     with_changes(
         py__pkg__core_DOT_py="def run():\n    from pkg.sub import tool\n    return tool\n"),
     1, ["py/pkg/core.py:2: from pkg.sub import tool", "rule 'pkg may use no other component'",
         "py/pkg/sub/tool.py is component pkg.sub"]),
    ("two modules of one package import each other",
     with_changes(py__pkg__sub__other_DOT_py="from pkg.sub import tool\n",
                  py__pkg__sub__tool_DOT_py="import pkg.sub.other\n"), 1,
     ["rule 'no cycle': the parts of py/pkg/sub use each other",
      "py/pkg/sub/other.py:1: from pkg.sub import tool",
      "py/pkg/sub/tool.py:1: import pkg.sub.other"]),
    ("a header away from its code",
     with_changes(lib__impl__engine_DOT_h=None), 1,
     ["lib/engine.h:1: its code is lib/impl/engine.cc", "rule 'a header lives beside its code'"]),
    ("a rule naming no component",
     with_changes(docs__layers_DOT_md=RULES.replace("| base, lib |", "| base, nowhere |")), 2,
     ["docs/layers.md:5: app may use nowhere, which is no component"]),
]


def main():
    failed = 0
    for name, tree, status, expected in CASES:
        tree = {p: t for p, t in tree.items() if t is not None}
        code, output = check(tree)
        missing = [e for e in expected if e not in output]
        if code != status or missing:
            failed += 1
            print(f"FAIL: {name}: exit {code} (expected {status}); missing {missing}\n"
                  + textwrap.indent(output, "  | "))
        else:
            print(f"ok: {name}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
