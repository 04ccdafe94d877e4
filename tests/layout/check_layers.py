#!/usr/bin/env python3
"""The repository's layering, checked against its rules (docs/layers.md):

  - a component includes or imports only what its row allows (common <- proto <- worker_lib,
    coordinator <- launcher; hvrun <- hvrun.torch, hvrun.tensorflow <- hvrun.keras ...);
  - no two parts of a folder use each other, directly or through others (cycles.py), for C/C++
    folders and Python modules alike;
  - a header lives beside its code.

Every failure names the file, the line and the rule it breaks; the exit status is 1 when there
is one, 2 when the rules cannot be read.

    check_layers.py SOURCE_DIR [RULES_FILE]   (RULES_FILE: SOURCE_DIR/docs/layers.md)
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cycles  # noqa: E402
import rules as layer_rules  # noqa: E402
import sources  # noqa: E402

RULES_FILE = "docs/layers.md"


def check(root, rules_path):
    """(messages, summary) for the tree at `root`."""
    display = os.path.relpath(rules_path, root) if rules_path.startswith(root) else rules_path
    rules = layer_rules.read_rules(rules_path, display)
    files = sources.tracked_files(root)
    include_dirs = rules.installed_headers
    cxx = sources.include_uses(root, files, include_dirs)
    python = [u for r in rules.python_roots()
              for u in sources.import_uses(root, files, r, rules.extension_modules)]
    checked = {u.path for u in cxx + python}
    messages = layer_rules.layer_violations(rules, cxx + python)
    messages += cycles.cycles(cxx, cycles.cxx_unit)
    messages += cycles.cycles(python, cycles.python_unit)
    messages += layer_rules.misplaced_headers(rules, files)
    summary = (f"{len(cxx)} includes and {len(python)} imports of {len(checked)} files, "
               f"{len(rules.components)} components ({display})")
    return messages, summary


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    root = os.path.abspath(argv[1])
    rules_path = os.path.abspath(argv[2]) if len(argv) == 3 else os.path.join(root, RULES_FILE)
    try:
        messages, summary = check(root, rules_path)
    except (OSError, ValueError) as e:
        print(f"ERROR: cannot read the layering rules: {e}", file=sys.stderr)
        return 2
    if messages:
        print(f"FAIL: {len(messages)} layering violation(s) in {summary}:")
        for m in messages:
            print(m)
        return 1
    print(f"PASS: {summary}: every use allowed, no cycle, every header beside its code")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
