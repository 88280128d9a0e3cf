# What the training commands' end-to-end scripts share: fail and expect.
#   expect RC TEXT ARGS...  runs $ctorch ARGS, which must exit RC and print TEXT (grep);
#                           its output is left in $out
fail() { echo "FAIL: $*"; exit 1; }
expect() {
  local want=$1 text=$2; shift 2
  out=$("$ctorch" "$@" 2>&1); rc=$?
  [ "$rc" -eq "$want" ] || fail "ctorch $*: exit $rc, expected $want: $out"
  grep -q -- "$text" <<<"$out" || fail "ctorch $*: output lacks '$text': $out"
}
