#!/usr/bin/env bash
# Captures uwarp's traffic on the loopback interface while uwarp-perf runs Send, RDMA Write and
# RDMA Read (CRC off, then on), and while rping runs through `uwarp-run --mpa` (CRC with
# peer-to-peer, MPA revision 1, a READ RTR, MPA markers without and with CRC), and checks with tshark that every frame decodes as MPA / DDP /
# RDMAP: no "Malformed", no "Bad CRC32", every data-carrying TCP segment claimed by the iWARP
# dissectors; and the same while qperf runs RFC 7306 atomics.
# Usage: tests/capture/tshark_check.sh [BIN_DIR] [KEEP_DIR]
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
tag=tshark_check
# shellcheck source=tests/capture/decode_checks.sh
. "$(dirname "$0")/decode_checks.sh"

# start_capture NAME PORT: captures tcp port PORT on lo into $work/NAME.pcap (sets $cap);
# PORT may instead be a whole capture filter.
start_capture() {
  local filter="tcp port $2"
  [[ "$2" =~ ^[0-9]+$ ]] || filter=$2
  timeout 60 tshark -i lo -B 256 -s 0 -f "$filter" -w "$work/$1.pcap" -q 2>"$work/tshark-$1.log" &
  cap=$!
  for _ in $(seq 1 100); do
    grep -q "Capture started" "$work/tshark-$1.log" 2>/dev/null && break
    sleep 0.1
  done
}

# stop_and_decode NAME: ends the capture, then check_decoded NAME (decode_checks.sh).
stop_and_decode() {
  local name=$1
  sleep 0.5
  kill -INT "$cap" 2>/dev/null || true
  wait "$cap" 2>/dev/null || true
  grep -i "dropped" "$work/tshark-$name.log" >&2 || true
  check_decoded "$name"
}

for crc in nocrc crc; do
  port=$((20000 + RANDOM % 20000))
  start_capture "uwarp-$crc" "$port"
  flags=()
  [ "$crc" = crc ] && flags=(--crc)
  for op in send write read; do
    # One CPU: packets on lo are then captured in the order they were sent.
    timeout 60 taskset -c 0 "$perf" loopback --port "$port" --op "$op" --sizes 0,1,4K,100K,1M --iters 16 --verify \
      --no-progress "${flags[@]}" >"$work/perf-$crc-$op.txt" 2>&1 || {
      fail "uwarp-perf $op ($crc):"; cat "$work/perf-$crc-$op.txt" >&2; }
  done
  stop_and_decode "uwarp-$crc"
  for what in "Send" "Write" "Read Request" "Read Response"; do
    expect_found "uwarp-$crc" "DDP/RDMA.* $what" "$work/uwarp-$crc.list.txt"
  done
  if [ "$crc" = crc ]; then expect_found "uwarp-$crc" "Good CRC32" "$work/uwarp-$crc.decode.txt"; fi
done

# An unmodified program asking through uwarp-run --mpa for what rdma_conn_param cannot express.
if command -v rping >/dev/null; then
  for mpa in crc,p2p rev1 p2p-read markers crc,markers; do
    name="rping-${mpa/,/-}"
    port=$((20000 + RANDOM % 20000))
    # With markers, 1000-byte pings: a marker falls inside most FPDUs, not only at their start.
    size=()
    [[ "$mpa" == *markers* ]] && size=(-S 1000)
    start_capture "$name" "$port"
    timeout 30 "$bin/uwarp-run" --mpa "$mpa" rping -s -a 127.0.0.1 -p "$port" -C 3 "${size[@]}" -v >"$work/$name.server" 2>&1 &
    server=$!
    sleep 0.5
    checks=$((checks + 1))
    timeout 30 "$bin/uwarp-run" --mpa "$mpa" rping -c -a 127.0.0.1 -p "$port" -C 3 "${size[@]}" -v >"$work/$name.client" 2>&1 &&
      wait "$server" || { fail "$name: rping failed"; cat "$work/$name.client" "$work/$name.server" >&2; }
    stop_and_decode "$name"
    expect_found "$name" "rdma-ping-2" "$work/$name.client"
    if [ "$mpa" = rev1 ]; then
      expect_found "$name" "Revision: 1" "$work/$name.decode.txt"
    elif [[ "$mpa" == *markers* ]]; then
      # Both sides asked (the M bit in request and reply); tshark takes the markers out, a
      # marker inside an FPDU points back more than 0 bytes, and with CRC every CRC matches.
      expect_found "$name" "Marker flag: True" "$work/$name.decode.txt"
      expect_found "$name" "FPDU back pointer: [1-9][0-9]* bytes" "$work/$name.decode.txt"
      expect_found "$name" "DDP/RDMA.* Read Response" "$work/$name.list.txt"
      [ "$mpa" = markers ] || expect_found "$name" "Good CRC32" "$work/$name.decode.txt"
    elif [ "$mpa" = p2p-read ]; then
      # Only a READ RTR offered: the first DDP frame is a zero-length Read Request from the
      # active side (18-byte untagged header, 28-byte body, MPA length and CRC fields).
      checks=$((checks + 1))
      first=$(grep -m1 "DDP/RDMA" "$work/$name.list.txt")
      [[ "$first" == *" Read Request "* && "$(awk '{print $7}' <<<"$first")" == 118 ]] ||
        fail "$name: the first DDP frame is not a zero-length Read Request (RTR): $first"
    else
      expect_found "$name" "CRC flag: True" "$work/$name.decode.txt"
      expect_found "$name" "Good CRC32" "$work/$name.decode.txt"
      # The RTR: the first DDP frame is a zero-length Write from the active side (14-byte
      # tagged header, 2-byte MPA length, 4-byte CRC).
      checks=$((checks + 1))
      first=$(grep -m1 "DDP/RDMA" "$work/$name.list.txt")
      [[ "$first" == *" Write "* && "$(awk '{print $7}' <<<"$first")" == 86 ]] ||
        fail "$name: the first DDP frame is not a zero-length Write (RTR): $first"
    fi
  done
else
  echo "tshark_check: rping (rdmacm-utils) not installed: uwarp-run --mpa not checked" >&2
fi
# RFC 7306 atomics: unmodified qperf's rc_fetch_add_mr and rc_compare_swap_mr through uwarp-run,
# CRC off and on. The capture leaves out qperf's own control connection (its -lp port); its
# rdma_cm connections have ports of their own.
if command -v qperf >/dev/null; then
  shim=$bin/libinterop_connect_delay.so
  for crc in nocrc crc; do
    name="qperf-atomics-$crc"
    qport=$((20000 + RANDOM % 20000))
    mpa=()
    [ "$crc" = crc ] && mpa=(--mpa crc)
    start_capture "$name" "tcp and not port $qport"
    timeout 60 "$bin/uwarp-run" "${mpa[@]}" qperf -lp "$qport" >"$work/$name.server" 2>&1 &
    server=$!
    sleep 0.5
    for t in rc_fetch_add_mr rc_compare_swap_mr; do
      checks=$((checks + 1))
      # qperf 0.4.11's server may tell the port of its rdma_cm listener before it listens, and a
      # client that connects first is rejected: that failure alone is retried, up to three
      # attempts, each retry with the client's rdma_resolve_addr delayed by 500 ms
      # (tests/interop/connect_delay.c; tests/ofa/programs_test.sh, group_qperf, does the same).
      ok=0
      delay=()
      for attempt in 1 2 3; do
        if timeout 30 "$bin/uwarp-run" "${mpa[@]}" "${delay[@]}" qperf -cm1 -lp "$qport" -t 1 \
             127.0.0.1 "$t" >"$work/$name-$t.client" 2>&1; then
          ok=1
          break
        fi
        grep -q "unexpected event from RDMA CM: Event rejected" "$work/$name-$t.client" || break
        echo "tshark_check: $name: qperf $t: its client connected before its server listened (attempt $attempt)" >&2
        [ -f "$shim" ] && delay=(env "LD_PRELOAD=$shim" UWARP_CONNECT_DELAY_SKIP=0 UWARP_CONNECT_DELAY_MS=500)
      done
      [ "$ok" = 1 ] || { fail "$name: qperf $t failed"; cat "$work/$name-$t.client" >&2; }
    done
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    stop_and_decode "$name"
    expect_found "$name" "DDP/RDMA.* Atomic Request" "$work/$name.list.txt"
    expect_found "$name" "DDP/RDMA.* Atomic Response" "$work/$name.list.txt"
    expect_found "$name" "FetchAdd" "$work/$name.decode.txt"
    expect_found "$name" "CmpSwap" "$work/$name.decode.txt"
    if [ "$crc" = crc ]; then expect_found "$name" "Good CRC32" "$work/$name.decode.txt"; fi
  done
else
  echo "tshark_check: qperf not installed: RFC 7306 atomics not checked" >&2
fi
echo "tshark_check: $((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
