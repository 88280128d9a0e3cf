#!/usr/bin/env bash
# Installs, through apt, the Debian packages ctorch needs that are missing. Idempotent:
# prints nothing and changes nothing when everything is there.
#   scripts/deps.sh            build + test dependencies
#   scripts/deps.sh --run      also the data the main job trains on
#   scripts/deps.sh --fuzz     also clang's sanitizer/fuzzer runtime
set -euo pipefail

pkgs=(build-essential cmake pkg-config libopenblas-dev libsleef-dev zlib1g-dev libcmocka-dev)
for arg in "$@"; do
  case "$arg" in
    --run) pkgs+=(dataset-fashion-mnist) ;;
    --fuzz) pkgs+=(clang libclang-rt-dev) ;;
    *) echo "deps.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps.sh: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "deps.sh: need root or sudo to install ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
