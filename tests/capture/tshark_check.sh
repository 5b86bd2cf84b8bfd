#!/usr/bin/env bash
# Captures uwarp's traffic on the loopback interface while uwarp-perf runs Send, RDMA Write and
# RDMA Read (CRC off, then on), and checks with tshark that every frame decodes as MPA / DDP /
# RDMAP: no "Malformed", no "Bad CRC32", every data-carrying TCP segment claimed by the iWARP
# dissectors. Usage: tests/capture/tshark_check.sh [BIN_DIR] [KEEP_DIR]
set -euo pipefail
bin=${1:-build/bin}
keep=${2:-}
perf="$bin/uwarp-perf"
[ -x "$perf" ] || { echo "tshark_check: $perf missing" >&2; exit 1; }
if ! command -v tshark >/dev/null; then
  echo "tshark_check: SKIPPED: tshark is not installed" >&2
  exit 0
fi
if [ "$(id -u)" -ne 0 ] && ! command -v dumpcap >/dev/null; then
  echo "tshark_check: SKIPPED: capturing on lo needs root or dumpcap capabilities" >&2
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
checks=0

fail() {
  echo "tshark_check: FAIL: $*" >&2
  failures=$((failures + 1))
}
expect_found() {  # expect_found LABEL PATTERN FILE
  checks=$((checks + 1))
  grep -q -- "$2" "$3" || fail "$1: no '$2' in $(basename "$3")"
}
expect_absent() {  # expect_absent LABEL PATTERN FILE
  checks=$((checks + 1))
  if grep -qi -- "$2" "$3"; then fail "$1: '$2' in $(basename "$3"): $(grep -i -m3 -- "$2" "$3" | tr '\n' ' ')"; fi
}

for crc in nocrc crc; do
  port=$((20000 + RANDOM % 20000))
  pcap="$work/uwarp-$crc.pcap"
  timeout 60 tshark -i lo -B 256 -s 0 -f "tcp port $port" -w "$pcap" -q 2>"$work/tshark-$crc.log" &
  cap=$!
  for _ in $(seq 1 100); do
    grep -q "Capture started" "$work/tshark-$crc.log" 2>/dev/null && break
    sleep 0.1
  done
  flags=()
  [ "$crc" = crc ] && flags=(--crc)
  for op in send write read; do
    # One CPU: packets on lo are then captured in the order they were sent.
    timeout 60 taskset -c 0 "$perf" loopback --port "$port" --op "$op" --sizes 0,1,4K,100K,1M --iters 16 --verify \
      --no-progress "${flags[@]}" >"$work/perf-$crc-$op.txt" 2>&1 || {
      fail "uwarp-perf $op ($crc):"; cat "$work/perf-$crc-$op.txt" >&2; }
  done
  sleep 0.5
  kill -INT "$cap" 2>/dev/null || true
  wait "$cap" 2>/dev/null || true
  grep -i "dropped" "$work/tshark-$crc.log" >&2 || true
  decode="$work/decode-$crc.txt"
  list="$work/list-$crc.txt"
  tshark --disable-heuristic rpcrdma_iwarp -r "$pcap" -O iwarp_mpa,iwarp_ddp_rdmap >"$decode" 2>&1
  tshark --disable-heuristic rpcrdma_iwarp -r "$pcap" >"$list" 2>&1
  frames=$(grep -c . "$list" || true)
  echo "tshark_check: $crc: $frames frames captured"
  expect_absent "$crc" "malformed" "$decode"
  expect_absent "$crc" "Bad CRC" "$decode"
  expect_found "$crc" "MPA Request Frame" "$list"
  expect_found "$crc" "MPA Reply Frame" "$list"
  for what in "Send" "Write" "Read Request" "Read Response"; do
    expect_found "$crc" "DDP/RDMA.* $what" "$list"
  done
  # Data-carrying segments that tshark shows as plain TCP (not MPA/DDP, not a reassembly
  # fragment) would be frames the iWARP dissectors could not claim.
  checks=$((checks + 1))
  undecoded=$(awk '$6 == "TCP" && / Len=[1-9]/ && !/reassembled PDU/' "$list" | head -5)
  [ -z "$undecoded" ] || fail "$crc: segments not decoded as iWARP: $undecoded"
  if [ "$crc" = crc ]; then expect_found "$crc" "Good CRC32" "$decode"; fi
  if [ -n "$keep" ]; then mkdir -p "$keep"; cp "$pcap" "$decode" "$list" "$keep/"; fi
done
echo "tshark_check: $((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
