#!/usr/bin/env bash
# Runs every libFuzzer target for SECONDS_PER_TARGET seconds (default 20) over a scratch copy of
# its seed corpus in fuzz/corpus/<target>/; exits non-zero if any target crashes or is missing.
#
#   fuzz/run-all.sh [SECONDS_PER_TARGET]
#
# Builds nothing: build the targets first (see cmake/Fuzz.cmake), e.g.
#   CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DUWARP_FUZZ=ON -DUWARP_TESTS=OFF \
#     -DUWARP_BENCH=OFF -DUWARP_SANITIZE=ON
#   ninja -C build-fuzz uwarp_fuzz
# Environment: FUZZ_BUILD, the build directory (default build-fuzz, relative to the repository
# root unless absolute). The committed corpus is never written to; crash inputs are kept in a
# directory that the script names at the end.
set -euo pipefail

seconds="${1:-20}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -eq 0 ]]; then
  echo "usage: $0 [SECONDS_PER_TARGET]  (a positive integer, default 20)" >&2
  exit 2
fi

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${FUZZ_BUILD:-build-fuzz}"
[[ "$build" = /* ]] || build="$root/$build"
corpus_root="$root/fuzz/corpus"

work="$(mktemp -d "${TMPDIR:-/tmp}/uwarp-fuzz.XXXXXX")"
keep_work=0
cleanup() { if [[ "$keep_work" -eq 0 ]]; then rm -rf "$work"; fi; }
trap cleanup EXIT

failed=()
for seeds in "$corpus_root"/*/; do
  target="$(basename "$seeds")"
  bin="$build/bin/$target"
  if [[ ! -x "$bin" ]]; then
    echo "== $target: $bin not found (build it first: ninja -C $build uwarp_fuzz)" >&2
    failed+=("$target (missing)")
    continue
  fi
  corpus="$work/$target/corpus"
  artifacts="$work/$target/artifacts"
  mkdir -p "$corpus" "$artifacts"
  cp -- "$seeds"/* "$corpus"/
  echo "== $target: ${seconds}s from $(ls "$corpus" | wc -l) seeds"
  log="$work/$target/log"
  if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$artifacts/" "$corpus" >"$log" 2>&1; then
    grep -E '^stat::number_of_executed_units|^#[0-9]+.*DONE' "$log" | tail -2 || true
  else
    status=$?
    echo "== $target: FAILED (exit $status); last lines of its log:" >&2
    tail -n 40 "$log" >&2
    failed+=("$target")
    keep_work=1
  fi
done

if [[ "${#failed[@]}" -gt 0 ]]; then
  echo "FAILED: ${failed[*]}" >&2
  if [[ "$keep_work" -eq 1 ]]; then echo "logs and crash inputs kept in $work" >&2; fi
  exit 1
fi
echo "all fuzz targets ran ${seconds}s each without a crash"
