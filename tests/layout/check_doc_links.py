#!/usr/bin/env python3
"""Every relative link in the repository's Markdown files reaches a file of the repository, and
every `#anchor` a heading of the page it names (GitHub's heading slugs).

    check_doc_links.py ROOT

Documents point at each other and at the code a great deal (the map, the design pages); a moved
file or a renamed heading leaves a dead link that nobody notices until a reader follows it.
Links to other sites are not followed (no network in tests).
"""
import os
import re
import subprocess
import sys

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")


def slug(text):
    """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces to '-'."""
    text = re.sub(r"`([^`]*)`", r"\1", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def lines_outside_code(path):
    fenced = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                yield number, line


def anchors(path):
    found, seen = set(), {}
    for _, line in lines_outside_code(path):
        match = HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else "%s-%d" % (base, count))
    return found


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    listed = subprocess.run(["git", "-C", root, "ls-files", "*.md"], check=True,
                            capture_output=True, text=True).stdout.split()
    pages = [p for p in listed if not p.startswith(("bench/RESULTS", "tests/layout/fixtures"))]
    cache, dead, checked = {}, [], 0
    for page in pages:
        for number, line in lines_outside_code(os.path.join(root, page)):
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, mailto:, ...
                    continue
                checked += 1
                path, _, anchor = target.partition("#")
                resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
                full = os.path.join(root, resolved)
                if not os.path.exists(full):
                    dead.append("%s:%d: %s: no file %s" % (page, number, target, resolved))
                    continue
                if anchor and resolved.endswith(".md"):
                    if resolved not in cache:
                        cache[resolved] = anchors(full)
                    if anchor not in cache[resolved]:
                        dead.append("%s:%d: %s: %s has no heading '#%s'" %
                                    (page, number, target, resolved, anchor))
    if dead:
        print("FAIL: %d dead link(s) of %d in %d pages:" % (len(dead), checked, len(pages)))
        print("\n".join(dead))
        return 1
    print("PASS: %d relative links in %d pages, every one reaches its file and heading" %
          (checked, len(pages)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
