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
# root unless absolute); FUZZ_JOBS, how many targets run at once (default: the number of CPUs;
# a target is one process); FUZZ_KEEP_NEW, a directory where each target's corpus is kept and
# grown across runs (DIR/<target>/, seeded from fuzz/corpus/<target>/ the first time). The
# committed corpus is never written to; crash inputs are kept in a directory that the script
# names at the end.
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

# run_target TARGET SEEDS: one target's run; leaves its exit status in $work/TARGET/status.
run_target() {
  local target=$1 seeds=$2 dir="$work/$1" status=0 dir_corpus
  mkdir -p "$dir/corpus" "$dir/artifacts"
  cp -- "$seeds"/* "$dir/corpus"/
  if [[ -n "${FUZZ_KEEP_NEW:-}" ]]; then
    # The kept corpus: what earlier long runs found is where this run starts.
    mkdir -p "$FUZZ_KEEP_NEW/$target"
    cp -n -- "$dir/corpus"/* "$FUZZ_KEEP_NEW/$target"/ 2>/dev/null || true
    dir_corpus="$FUZZ_KEEP_NEW/$target"
  else
    dir_corpus="$dir/corpus"
  fi
  "$build/bin/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$dir/artifacts/" "$dir_corpus" >"$dir/log" 2>&1 || status=$?
  echo "$status" >"$dir/status"
}

jobs="${FUZZ_JOBS:-$(nproc)}"
targets=()
failed=()
for seeds in "$corpus_root"/*/; do
  target="$(basename "$seeds")"
  if [[ ! -x "$build/bin/$target" ]]; then
    echo "== $target: $build/bin/$target not found (build it first: ninja -C $build uwarp_fuzz)" >&2
    failed+=("$target (missing)")
    continue
  fi
  while [[ "$(jobs -rp | wc -l)" -ge "$jobs" ]]; do wait -n || true; done
  echo "== $target: ${seconds}s from $(ls "$seeds" | wc -l) seeds"
  run_target "$target" "$seeds" &
  targets+=("$target")
done
wait

for target in "${targets[@]}"; do
  log="$work/$target/log"
  status="$(cat "$work/$target/status" 2>/dev/null || echo "?")"
  if [[ "$status" = 0 ]]; then
    echo "== $target:"
    grep -E '^stat::number_of_executed_units|^#[0-9]+.*DONE' "$log" | tail -2 || true
  else
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
