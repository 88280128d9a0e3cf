#!/usr/bin/env bash
# The layering rules of docs/design.md ("Layers"), checked on the sources and on the
# built objects. Fails with every violation listed.
#
#   tests/check_layering.sh SOURCE_ROOT [BUILD_DIR]
#
# 1. Greps: no CT_HAVE_CUDA in src/core, meta, api, dispatch, amp; no "cuda/..." include in
#    core, meta, api, dispatch, amp, cpu; no "cpu/..." include and no ct_cpu_ name in
#    src/cuda; src/core/tensor_impl.h does not include the umbrella ctorch.h.
# 2. Folder graph without cycles: every src/<folder> is a unit (src/registry.c is the
#    unit "registry"). An edge A -> B exists when a file of A includes a header of B
#    (#include "B/...") or when an object of A uses a symbol an object of B defines
#    (nm over BUILD_DIR's objects, so calls through headers and through local
#    prototypes both count; calls through function pointers, the way backends plug in,
#    do not). No two units may reach each other. The one documented up-call is
#    allowed by name: core and dispatch call the registry's ct_runtime_init (and core
#    its ct_runtime_load_backend, Note [Lazy CUDA backend]) and include
#    registry.h (Note [Registry] in src/registry.c).
# (The folders over the public API are checked by check_layering_api.sh.)
set -u
root=${1:?source root}
build=${2:-}
cd "$root" || exit 1
fail=0
say() { echo "$*"; fail=1; }

# ------------------------------------------------------------------ 1. greps
hits=$(grep -rn --include='*.[ch]' CT_HAVE_CUDA src/core src/meta src/api src/dispatch src/amp)
[ -z "$hits" ] || say "FAIL: CT_HAVE_CUDA outside the backends and the registry:"$'\n'"$hits"
hits=$(grep -rn '#[[:space:]]*include[[:space:]]*"cuda/' src/core src/meta src/api src/dispatch src/amp src/cpu)
[ -z "$hits" ] || say "FAIL: a cuda/ header included below or beside the CUDA backend:"$'\n'"$hits"
hits=$(grep -rn '#[[:space:]]*include[[:space:]]*"cpu/\|ct_cpu_' src/cuda)
[ -z "$hits" ] || say "FAIL: the CUDA backend reaches into the CPU backend:"$'\n'"$hits"
hits=$(grep -n '"ctorch.h"' src/core/tensor_impl.h)
[ -z "$hits" ] || say "FAIL: src/core/tensor_impl.h includes the umbrella header:"$'\n'"$hits"

# ------------------------------------------------------------------ 2. the folder graph
unit_of() { # path relative to the root -> unit
  case $1 in
    src/registry.*) echo registry ;;
    src/*/*) local r=${1#src/}; echo "${r%%/*}" ;;
    *) echo "" ;;
  esac
}
edges=$(mktemp)
trap 'rm -f "$edges"' EXIT
# includes: "folder/file.h" names a header of that folder; a bare "file.h" is the
# including folder's own (or src/core's, through the include path: an edge to core)
while IFS= read -r -d '' file; do
  from=$(unit_of "$file")
  while IFS= read -r name; do
    case $name in
      ctorch.h | ctorch/*) continue ;;
      registry.h) to=registry ;;
      */*) to=${name%%/*} ;;
      *) if [ -f "$(dirname "$file")/$name" ]; then to=$from; elif [ -f "src/core/$name" ]; then to=core; else continue; fi ;;
    esac
    [ -d "src/$to" ] || [ "$to" = registry ] || continue
    [ "$to" = "$from" ] || echo "$from $to include ${file}: $name"
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
done < <(find src -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print0) >>"$edges"
# symbols: from the objects of the library, the CUDA backend and the ctorch tool
nobj=0
if [ -n "$build" ]; then
  defs=$(mktemp) uses=$(mktemp)
  trap 'rm -f "$edges" "$defs" "$uses"' EXIT
  while IFS= read -r obj; do
    rel=${obj#*/src/}
    src=src/${rel%.o}
    [ -f "$src" ] || continue # an object of a source that no longer exists
    unit=$(unit_of "$src")
    nobj=$((nobj + 1))
    nm "$obj" 2>/dev/null | awk -v u="$unit" -v f="$src" -v D="$defs" -v U="$uses" '
      $1 == "U" { print $2, u, f > U }
      NF == 3 && $2 ~ /^[TDBRC]$/ { print $3, u > D }'
  done < <(find "$build/CMakeFiles" -path '*/src/*' -name '*.o' 2>/dev/null)
  awk 'NR == FNR { def[$1] = $2; next } ($1 in def) && def[$1] != $2 { print $2, def[$1], "symbol", $3 ": " $1 }' \
    "$defs" "$uses" >>"$edges"
  [ $nobj -gt 0 ] || say "FAIL: no objects found under $build/CMakeFiles"
fi
# the documented up-call (and only it)
allowed() { # from to kind detail
  case "$1 $2" in
    "core registry" | "dispatch registry")
      [ "$3" = include ] && [[ $4 == *": registry.h" ]] && return 0
      [ "$3" = symbol ] && [[ $4 == *": ct_runtime_init" || $4 == *": ct_runtime_load_backend" ]] && return 0 ;;
  esac
  return 1
}
filtered=$(mktemp)
trap 'rm -f "$edges" "$filtered" ${defs:-} ${uses:-}' EXIT
while read -r from to kind detail; do
  allowed "$from" "$to" "$kind" "$detail" || echo "$from $to $kind $detail"
done <"$edges" >"$filtered"
# cycles: the transitive closure over the unit graph; a pair reaching each other is one
cycles=$(awk '
  { e[$1 " " $2] = 1; n[$1] = 1; n[$2] = 1; if (!(($1 " " $2) in why)) why[$1 " " $2] = $0 }
  END {
    for (a in n) for (b in n) r[a " " b] = (a " " b) in e
    for (k in n) for (a in n) if (r[a " " k]) for (b in n) if (r[k " " b]) r[a " " b] = 1
    for (a in n) for (b in n) if (a < b && r[a " " b] && r[b " " a]) {
      print "cycle: " a " <-> " b
      for (x in why) { split(x, p, " "); if ((p[1] == a || p[1] == b) && r[p[2] " " p[1]] && (p[2] == a || p[2] == b || (r[p[2] " " a] && r[a " " p[2]]))) print "    " why[x] }
    }
  }' "$filtered")
[ -z "$cycles" ] || say "FAIL: folders that reach each other:"$'\n'"$cycles"

units=$(awk '{ print $1; print $2 }' "$filtered" | sort -u | wc -l)
if [ $fail -ne 0 ]; then
  exit 1
fi
echo "layering: ok (greps clean; $units units, $(wc -l <"$filtered") edges from includes and $nobj objects, no cycle)"
