#!/usr/bin/env bash
# Fails if README.md or docs/*.md name a source path that does not exist (issue 22: docs named
# src/sim/gpu_models.h after it moved to src/config/). Checks repository-relative paths under src/,
# tests/, tools/, scripts/, examples/, web/ and cmake/ ending in a file extension; paths inside a build
# directory (build/src/...) are generated and skipped.
set -u
root=${1:?usage: check_doc_paths.sh REPO_ROOT}
cd "$root" || exit 2
fail=0
for doc in README.md docs/*.md; do
  # A path starts the text or follows a character that cannot be part of a path (so build/src/x.cc
  # and ../shared/... are not taken for src/x.cc).
  while IFS= read -r p; do
    [ -e "$p" ] && continue
    echo "$doc names $p, which does not exist"
    fail=1
  done < <(grep -oE '(^|[^A-Za-z0-9_./-])(src|tests|tools|scripts|examples|web|cmake)/[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.(h|cc|ts|mjs|js|py|sh|yaml|yml|json|cmake|csv|txt)\b' "$doc" |
           sed -E 's/^[^a-z]//' | sort -u)
done
[ "$fail" -eq 0 ] || exit 1
echo "every source path named in README.md and docs/ exists"
