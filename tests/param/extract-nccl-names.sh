#!/usr/bin/env bash
# extract-nccl-names.sh - the environment variables NCCL itself reads, from NCCL's sources.
# Prints one name a line, sorted: the data in tests/param/nccl-2.30-names.txt came from
#
#   tests/param/extract-nccl-names.sh /work/.mirror/NVIDIA+nccl/repo v2.30.7-1
#
# (a bare git repository of github.com/NVIDIA/nccl and a tag). What counts as "read by NCCL" is
# what libnccl's own sources (src/, not the example plugins or contrib/) read:
#   1. NCCL_PARAM(name, "X", default)          the legacy cached parameters: NCCL_X
#   2. DEFINE_NCCL_PARAM(name, type, KEY, ...) the 2.30 parameter registry: KEY
#   3. ncclGetEnv("NCCL_X"), getenv("NCCL_X"), std::getenv("NCCL_X")   read at each use
#   4. ncclGetLevel(&level, "NCCL_X", "NCCL_Y") names passed to NCCL's path-level helper
# Names NCCL only mentions in messages are not counted.
set -eu
repo=${1:?usage: extract-nccl-names.sh NCCL_GIT_DIR TAG}
tag=${2:?usage: extract-nccl-names.sh NCCL_GIT_DIR TAG}
g() { git -C "$repo" grep -h -o -E "$1" "$tag" -- 'src/*' || true; }
{
  g '(^|[^_A-Za-z])NCCL_PARAM\([A-Za-z0-9_]+, *"[A-Z0-9_]+"' | sed -E 's/.*"([A-Z0-9_]+)"$/NCCL_\1/'
  g 'DEFINE_NCCL_PARAM\([A-Za-z0-9_]+, *[^,]+, *[A-Z0-9_]+' | sed -E 's/.*, *([A-Z0-9_]+)$/\1/'
  g '(ncclGetEnv|getenv)\("NCCL_[A-Z0-9_]+"' | sed -E 's/.*"(NCCL_[A-Z0-9_]+)"$/\1/'
  g 'ncclGetLevel\([^;]*' | grep -o -E '"NCCL_[A-Z0-9_]+"' | tr -d '"'
} | grep -E '^NCCL_[A-Z0-9_]+$' | LC_ALL=C sort -u
