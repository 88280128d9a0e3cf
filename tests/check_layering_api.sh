#!/usr/bin/env bash
# src/nn, src/optim, src/data, src/io and src/cli sit over the public API: each of
# their files includes ctorch.h, ctorch/*.h (the public headers and ctorch/ext.h, the
# extension header) and headers of its own folder, nothing else of ctorch's
# (docs/design.md, "What each folder may include"). This check lists every other include and fails on any. Quoted
# includes are checked by name; an angle-bracket include fails when it names a file
# of src/ (<tensor_impl.h> found through the include path is still an internal header).

set -u
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
allowed_files=()
folders=(nn optim data io cli distributed)
bad=0
checked=0
for folder in "${folders[@]}"; do
  dir=$root/src/$folder
  [ -d "$dir" ] || { echo "FAIL: no $dir"; exit 1; }
  while IFS= read -r -d '' file; do
    rel=${file#"$root"/}
    skip=0
    for a in "${allowed_files[@]}"; do [ "$rel" = "$a" ] && skip=1; done
    [ $skip = 1 ] && continue
    checked=$((checked + 1))
    while IFS= read -r line; do
      num=${line%%:*}
      text=${line#*:}
      if [[ $text =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\"([^\"]+)\" ]]; then
        name=${BASH_REMATCH[1]}
        case $name in
          ctorch.h | ctorch/*.h) continue ;;
          "$folder"/*) [ -f "$root/src/$name" ] && continue ;;
          */*) ;;
          *) [ -f "$dir/$name" ] && continue ;;
        esac
      elif [[ $text =~ ^[[:space:]]*#[[:space:]]*include[[:space:]]*\<([^\>]+)\> ]]; then
        name=${BASH_REMATCH[1]}
        case $name in
          ctorch.h | ctorch/*.h) continue ;;
        esac
        [ -f "$root/src/$name" ] || [ -f "$root/src/core/$name" ] || continue
      else
        continue
      fi
      echo "$rel:$num: $text"
      bad=$((bad + 1))
    done < <(grep -n '^[[:space:]]*#[[:space:]]*include' "$file")
  done < <(find "$dir" -type f \( -name '*.c' -o -name '*.h' \) -print0 | sort -z)
done
if [ $bad -gt 0 ]; then
  echo "FAIL: $bad include(s) of internal headers in src/{${folders[*]}}"
  echo "      (allowed: ctorch.h, ctorch/*.h including ctorch/ext.h, the folder's own headers)"
  exit 1
fi
echo "layering_api: ok ($checked files of src/{${folders[*]}}; allowed by name: ${allowed_files[*]:-none})"
