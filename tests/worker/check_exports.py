#!/usr/bin/env python3
"""libhvrun.so exports exactly the public API: every dynamic symbol it defines is declared in a
public header, and every function the C header declares is exported.

    check_exports.py LIBHVRUN_SO HEADER...

A C symbol must be a function declared in a header (`hvrun_x(`); a C++ symbol must sit directly
in namespace hvrun, under a class or function that a header declares (`class X`, `struct X`,
` x(`). Anything else (hvrun::detail, gRPC, protobuf, Gloo, spdlog, the C++ library) fails.
"""
import re
import subprocess
import sys


def exported(library):
    out = subprocess.run(["nm", "-D", "--defined-only", "--demangle", library], check=True,
                         capture_output=True, text=True).stdout
    symbols = []
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3:
            symbols.append(parts[2])
    return symbols


def main():
    library, headers = sys.argv[1], sys.argv[2:]
    text = "\n".join(open(h, encoding="utf-8").read() for h in headers)
    types = set(re.findall(r"\b(?:class|struct)\s+(?:\[\[\w+\]\]\s+)?(\w+)\s*[{:]", text))
    # Namespaces nested in hvrun that a header opens (hvrun::elastic) hold API as classes do.
    types |= set(re.findall(r"\bnamespace\s+hvrun::(\w+)", text))
    functions = set(re.findall(r"\b(\w+)\s*\(", text))
    # Type names (hvrun_status_t) stand before "(" in a function-pointer typedef.
    c_declared = {f for f in functions if f.startswith("hvrun_") and not f.endswith("_t")}

    wrong, c_exported = [], set()
    for symbol in exported(library):
        name = symbol.split("@")[0]
        if name == "HVRUN_0":  # the version node
            continue
        if re.fullmatch(r"hvrun_\w+", name):
            c_exported.add(name)
            if name not in c_declared:
                wrong.append(symbol + "   (not declared in a public header)")
            continue
        m = re.match(r"hvrun::(\w+)(?:\[abi:\w+\])?(::|\()", name)
        if not m or m.group(1) not in (types if m.group(2) == "::" else functions):
            wrong.append(symbol)
    missing = sorted(c_declared - c_exported)
    if wrong:
        print("libhvrun.so exports %d symbols that are not public API:" % len(wrong))
        print("\n".join("  " + w for w in wrong[:50]))
    if missing:
        print("declared in hvrun/c_api.h but not exported: " + ", ".join(missing))
    if wrong or missing:
        return 1
    print("libhvrun.so: %d C and %d C++ symbols, all public API"
          % (len(c_exported), len(exported(library)) - len(c_exported) - 1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
