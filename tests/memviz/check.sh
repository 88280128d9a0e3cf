#!/bin/sh
# ctorch memviz: pages from pickle and JSON snapshots, and clean failures on bad input.
# Usage: check.sh CTORCH   (run where test_alloc_snapshot wrote alloc_snapshot.*)
set -u
ctorch=$1
fail() { echo "FAIL: $*"; exit 1; }
[ -f alloc_snapshot.pickle ] || fail "alloc_snapshot.pickle missing (test_alloc_snapshot writes it)"

for fmt in pickle json; do
  out=memviz_$fmt.html
  rm -f "$out"
  "$ctorch" memviz alloc_snapshot.$fmt -o "$out" >/dev/null || fail "memviz on alloc_snapshot.$fmt"
  for needle in '<!DOCTYPE html>' 'id="snapshot-data"' '"segments":[{' '"device_traces":[[' \
                '"state":"active_allocated"' '"name":"linear"' 'Segment map' '</html>'; do
    grep -qF "$needle" "$out" || fail "$out lacks $needle"
  done
  # self-contained: no network resource
  if grep -qE '(src|href)="(https?:)?//' "$out"; then fail "$out loads something from the network"; fi
done
# the default output name
rm -f alloc_snapshot.pickle.html
"$ctorch" memviz alloc_snapshot.pickle >/dev/null && [ -s alloc_snapshot.pickle.html ] || fail "default output name"

# PyTorch 1.13's _snapshot() was the segment list alone
printf '\200\002].' > list_root.pickle
"$ctorch" memviz list_root.pickle -o list_root.html >/dev/null || fail "a bare segment list"
grep -qF '{"segments":[]}' list_root.html || fail "a bare segment list is not wrapped in a dict"
rm -f list_root.pickle list_root.html

expect_rc() { # expect_rc RC ARGS...
  want=$1; shift
  "$ctorch" memviz "$@" >/dev/null 2>memviz_err.txt
  got=$?
  [ "$got" = "$want" ] || fail "memviz $* returned $got, expected $want: $(cat memviz_err.txt)"
}
expect_rc 2
expect_rc 2 --bogus alloc_snapshot.pickle
expect_rc 2 alloc_snapshot.pickle -o
expect_rc 1 does-not-exist.pickle -o bad.html
printf 'hello' > bad_text.bin
expect_rc 1 bad_text.bin -o bad.html
grep -q "neither a pickle" memviz_err.txt || fail "message for a non-pickle"
# a list that contains itself
printf '\200\002]q\000(h\000e.' > bad_cycle.pickle
expect_rc 1 bad_cycle.pickle -o bad.html
grep -q "contains itself" memviz_err.txt || fail "message for a cyclic pickle: $(cat memviz_err.txt)"
# code, not data
printf '\200\002cos\nsystem\nX\002\000\000\000lsR.' > bad_global.pickle
expect_rc 1 bad_global.pickle -o bad.html
grep -q "global 'os.system' is not allowed" memviz_err.txt || fail "message for GLOBAL: $(cat memviz_err.txt)"
[ ! -e bad.html ] || fail "a failed run left bad.html behind"
# a truncated snapshot (test_pickle_read tries every truncation in-process)
head -c 200 alloc_snapshot.pickle > trunc.pickle
expect_rc 1 trunc.pickle -o bad.html
grep -q "is truncated\|truncated)" memviz_err.txt || fail "message for a truncated pickle: $(cat memviz_err.txt)"
rm -f bad_text.bin bad_cycle.pickle bad_global.pickle trunc.pickle memviz_err.txt
echo "memviz: ok"
