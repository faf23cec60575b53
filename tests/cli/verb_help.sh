#!/bin/bash
# `tessera VERB ...` builds only VERB's options (src/cli/main.cc); `tessera --help VERB ...` builds every
# verb. Each verb's and sub-verb's help must read the same both ways (but `bench cluster`'s, which is
# tessera-bench-cluster's own).
set -u
bin=$1
subs() { awk '/^Subcommands:/{f=1;next} f && /^  [a-z]/{print $1} f && /^$/{f=0}'; }
same() {  # $1: lazy argv, $2: full argv (words)
  local a b
  a=$("$bin" $1 2>&1; echo "rc=$?")
  b=$("$bin" $2 2>&1; echo "rc=$?")
  if [ "$a" != "$b" ]; then echo "differs: tessera $1 / tessera $2"; diff <(echo "$a") <(echo "$b") | head -20; fail=1; fi
}
fail=0 n=0
verbs=$("$bin" --help | subs)
[ -n "$verbs" ] || { echo "no verbs in tessera --help"; exit 1; }
for v in $verbs; do
  same "$v --help" "--help $v"
  n=$((n + 1))
  for s in $("$bin" $v --help | subs); do
    # `bench cluster` passes its whole command line, --help too, to tessera-bench-cluster.
    [ "$v $s" = "bench cluster" ] && continue
    same "$v $s --help" "--help $v $s"; n=$((n + 1))
  done
done
echo "$n verbs and sub-verbs checked"
exit $fail
