#!/usr/bin/env bash
# Installs, through apt, the Debian packages ctorch needs that are missing. Idempotent:
# prints nothing and changes nothing when everything is there. Runs as root, or as a
# user with sudo.
#   scripts/deps.sh            build + test dependencies
#   scripts/deps.sh --run      also the data the main job trains on (Fashion-MNIST)
#   scripts/deps.sh --fuzz     also clang and its sanitizer/libFuzzer runtime
#   scripts/deps.sh --download DIR   fetch the build and test libraries (with their
#                  runtime libraries) as .deb files into DIR instead, for a machine with no
#                  network and no -dev packages: scripts/gpu-check.sh unpacks them
set -euo pipefail

# libclang-rt-14-dev is the runtime of Debian 12's clang (14); libFuzzer is in it.
# libopenblas-openmp-dev: the OpenMP build of OpenBLAS (Note [OpenBLAS threads] in
# CMakeLists.txt); libopenblas-dev alone brings the pthread build.
pkgs=(build-essential cmake pkg-config libopenblas-dev libopenblas-openmp-dev libdnnl-dev libsleef-dev zlib1g-dev libcmocka-dev)
download=""
while [ $# -gt 0 ]; do
  case "$1" in
    --run) pkgs+=(dataset-fashion-mnist) ;;
    --fuzz) pkgs+=(clang libclang-rt-14-dev) ;;
    --download) download=${2:?--download needs a folder}; shift ;;
    -h|--help) sed -n '2,10s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) echo "deps.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done

if [ -n "$download" ]; then
  # The libraries of the list and what they load at run time; the toolchain (compiler,
  # cmake) is the target machine's own.
  libs=(libopenblas-dev libopenblas-openmp-dev libopenblas0-openmp libopenblas0 libgfortran5 libquadmath0
        libdnnl-dev libdnnl2 ocl-icd-libopencl1 libsleef-dev libsleef3 zlib1g-dev zlib1g libcmocka-dev libcmocka0)
  mkdir -p "$download"
  (cd "$download" && apt-get download "${libs[@]}" >/dev/null) || { echo "deps.sh: apt-get download failed" >&2; exit 1; }
  echo "deps.sh: $(ls "$download"/*.deb | wc -l) packages in $download"
  exit 0
fi

if ! command -v dpkg-query >/dev/null; then
  echo "deps.sh: not a Debian system; install by hand: ${pkgs[*]}" >&2
  exit 1
fi

missing=()
for p in "${pkgs[@]}"; do
  [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "deps.sh: missing ${missing[*]}; run as root or install sudo" >&2
    exit 1
  fi
  SUDO=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
trap 'rm -f "$log"' EXIT
quietly() { "$@" >"$log" 2>&1 || { cat "$log" >&2; echo "deps.sh: failed: $*" >&2; exit 1; }; }

echo "deps.sh: installing ${missing[*]}"
# Fresh machines have no or stale package lists.
quietly "${SUDO[@]}" apt-get update
for p in "${missing[@]}"; do
  apt-cache show "$p" >/dev/null 2>&1 || { echo "deps.sh: apt knows no package $p" >&2; exit 1; }
done
quietly "${SUDO[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
