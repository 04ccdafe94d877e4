#!/usr/bin/env bash
# Nothing the repository tracks reads a path outside its clone: no path into a folder beside
# the clone and no absolute path of a developer's machine. bench/RESULTS.md is exempt: it quotes
# the commands of earlier measurements as they were run. (CI itself runs in a clone in an empty
# scratch folder.)
#   check_self_contained.sh SOURCE_DIR
set -euo pipefail
cd "$1"
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "SKIP: $1 is not a git checkout (nothing to list)"; exit 77
fi
# The folders searched for, spelled so that this file does not name them itself.
beside='\.\.''/shar''ed'
machine='/wor''k/(main|shar''ed)'
status=0
hits="$(git grep -nIE "$beside|$machine" -- . ':!bench/RESULTS.md')" || status=$?
if [ "$status" -gt 1 ]; then  # 1 is "nothing found"
  echo "FAIL: git grep could not search the tracked files (exit $status)"; exit 1
fi
if [ -n "$hits" ]; then
  echo "FAIL: paths outside the repository:"; echo "$hits"; exit 1
fi
echo "PASS: $(git ls-files | wc -l) tracked files, none names a path outside the clone"
