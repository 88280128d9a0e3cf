#!/usr/bin/env bash
# ct_ew_has_args (src/meta/ew_args.c) lists by hand the ops that ct_ew_prepare,
# ct_ew_setup and divides_integers treat specially; the fast lane (Note [Fast lane])
# skips exactly those. This check fails when a case label is added to one of those
# functions but not to the list, or the list names an op none of them handles.
set -u
src=${1:-$(cd "$(dirname "$0")/.." && pwd)/src/meta/ew_args.c}
[ -f "$src" ] || { echo "FAIL: no $src"; exit 1; }
# the case labels inside the body of function $1 (from its signature to the closing brace)
labels() {
  awk -v fn="$1" '
    index($0, fn "(") && /^[a-z]/ { sig = 1 }
    sig && /\{$/ { inside = 1; sig = 0; next }
    inside && /^}/ { inside = 0 }
    inside { while (match($0, /case CT_OP_[a-z0-9_]+/)) { print substr($0, RSTART + 8, RLENGTH - 8); $0 = substr($0, RSTART + RLENGTH) } }
  ' "$src" | sort -u
}
listed=$(labels ct_ew_has_args)
handled=$( { labels ct_ew_prepare; labels ct_ew_setup; labels divides_integers; } | sort -u)
[ -n "$listed" ] && [ -n "$handled" ] || { echo "FAIL: no case labels found in $src"; exit 1; }
if [ "$listed" != "$handled" ]; then
  echo "FAIL: ct_ew_has_args differs from the ops ct_ew_prepare/ct_ew_setup/divides_integers handle"
  diff <(echo "$listed") <(echo "$handled")
  exit 1
fi
echo "check_ew_args: ok ($(echo "$listed" | wc -l) ops)"
