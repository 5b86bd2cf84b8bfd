#!/usr/bin/env bash
# Checks the captures uwarp writes itself (UWARP_PCAP, uwarp-run --pcap; docs/tracing.md): runs
# uwarp-perf's server and client over 127.0.0.1 with Send, RDMA Write and RDMA Read, CRC off and
# on, each process writing its own file (the server with UWARP_PCAP, the client through
# `uwarp trace`), and rping through `uwarp-run --pcap` with MPA markers,
# without and with CRC; then decodes every file with tshark as tshark_check.sh decodes captures
# taken on lo: no "Malformed", no "Bad CRC32", the MPA request and reply, every data-carrying TCP
# segment claimed by the iWARP dissectors. And counts: the RDMAP messages decoded of the run's
# opcode number at least the messages it sent, and carry at least its bytes; and the two ends'
# files, each written by its own process, decode to the same messages and bytes of every opcode.
# Needs no root and no dumpcap.
# Usage: tests/capture/pcap_trace_check.sh [BIN_DIR] [KEEP_DIR]
set -euo pipefail
bin=${1:-build/bin}
keep=${2:-}
perf="$bin/uwarp-perf"
[ -x "$perf" ] || { echo "pcap_trace_check: $perf missing" >&2; exit 1; }
[ -x "$bin/uwarp" ] || { echo "pcap_trace_check: $bin/uwarp missing" >&2; exit 1; }
if ! command -v tshark >/dev/null; then
  echo "pcap_trace_check: SKIPPED: tshark is not installed" >&2
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tag=pcap_trace_check
# shellcheck source=tests/capture/decode_checks.sh
. "$(dirname "$0")/decode_checks.sh"

# decode NAME: check_decoded NAME (decode_checks.sh), once uwarp has written the file.
decode() {
  local name=$1 pcap="$work/$1.pcap"
  checks=$((checks + 1))
  if [ ! -s "$pcap" ]; then
    fail "$name: no capture written ($pcap)"
    return
  fi
  check_decoded "$name"
}

# rdmap_totals NAME OPCODE: "MESSAGES BYTES" of RDMAP opcode OPCODE decoded in NAME.pcap: the
# messages (DDP segments with the Last flag) and the payload bytes (each FPDU's ULPDU less its
# DDP/RDMAP header: 14 bytes tagged, 18 untagged, and a Read Request's 28-byte body).
# tshark reads each file once: its fields are kept in NAME.fields.txt.
rdmap_totals() {
  local fields="$work/$1.fields.txt"
  [ -f "$fields" ] ||
    tshark --disable-heuristic rpcrdma_iwarp --disable-protocol enip -r "$work/$1.pcap" -Y iwarp_rdma -T fields \
      -E occurrence=a -E aggregator=' ' -e iwarp_rdma.opcode -e iwarp_ddp.last_flag \
      -e iwarp_mpa.ulpdulength -e iwarp_ddp.tagged_flag >"$fields" 2>/dev/null
  awk -F'\t' -v want="$2" '
      { n = split($1, op, " "); split($2, last, " "); split($3, len, " "); split($4, tagged, " ")
        for (i = 1; i <= n; i++) {
          if (op[i] + 0 != want + 0) continue
          if (last[i] == "1" || last[i] == "True") messages++
          header = (tagged[i] == "1" || tagged[i] == "True") ? 14 : 18
          if (want + 0 == 1 && header == 18) header = 18 + 28
          bytes += len[i] - header
        } }
      END { printf "%d %d\n", messages, bytes }' "$fields"
}

# expect_messages NAME WHAT OPCODE MESSAGES BYTES: at least MESSAGES messages and BYTES bytes.
expect_messages() {
  checks=$((checks + 1))
  local got messages bytes
  got=$(rdmap_totals "$1" "$3")
  read -r messages bytes <<<"$got"
  echo "pcap_trace_check: $1: $2: $messages messages, $bytes bytes decoded (sent at least $4, $5)"
  [ "$messages" -ge "$4" ] && [ "$bytes" -ge "$5" ] ||
    fail "$1: $2: decoded $messages messages and $bytes bytes, fewer than the $4 and $5 sent"
}

# segments NAME: NAME.pcap's data-carrying segments, each direction apart (in file order within
# it): "PORTS LENGTH OPCODES ULPDU-LENGTHS LAST-FLAGS TSHARK'S-NOTES". Two ends' files of one run
# list the same lines when each cut the stream as the other did.
segments() {
  tshark --disable-heuristic rpcrdma_iwarp --disable-protocol enip -r "$work/$1.pcap" -Y 'tcp.len > 0' -T fields \
    -E occurrence=a -E aggregator=' ' -e tcp.srcport -e tcp.dstport -e tcp.len \
    -e iwarp_rdma.opcode -e iwarp_mpa.ulpdulength -e iwarp_ddp.last_flag -e _ws.expert.message \
    2>/dev/null | awk -F'\t' '{ print $1 ">" $2 "\t" $0 }' | cut -f1,4- | sort -s -t$'\t' -k1,1
}

# expect_same_totals NAME_A NAME_B: the same messages and bytes of each RDMAP opcode in both.
# Where they differ, the evidence goes to the output: the segments that differ between the files.
expect_same_totals() {
  local op a b same=1
  for op in 0 1 2 3 7; do
    checks=$((checks + 1))
    a=$(rdmap_totals "$1" "$op")
    b=$(rdmap_totals "$2" "$op")
    [ "$a" = "$b" ] || { fail "opcode $op: $1 decodes to $a (messages, bytes), $2 to $b"; same=0; }
  done
  if [ "$same" = 0 ]; then
    echo "$tag: segments that differ (< $1, > $2; PORTS LENGTH OPCODES ULPDU-LENGTHS LAST NOTES):" >&2
    diff <(segments "$1") <(segments "$2") | head -40 >&2 || true
  fi
}

sizes=0,1,4K,100K,1M
iters=4
sent_bytes=$(( (0 + 1 + 4096 + 102400 + 1048576) * iters ))
sent_messages=$(( 5 * iters ))
for crc in nocrc crc; do
  flags=()
  [ "$crc" = crc ] && flags=(--crc)
  for op in send write read; do
    name="perf-$op-$crc"
    port=$((20000 + RANDOM % 20000))
    UWARP_PCAP="$work/$name-server.pcap" timeout 60 "$perf" server --addr 127.0.0.1 --port "$port" --once \
      >"$work/$name.server" 2>&1 &
    server=$!
    checks=$((checks + 1))
    ok=0
    for attempt in 1 2 3 4 5 6 7 8 9 10; do  # until the server listens
      sleep 0.3
      # The client through the front door, `uwarp trace` (uwarp-run with UWARP_PCAP set).
      if timeout 60 "$bin/uwarp" trace -o "$work/$name-client.pcap" -- "$perf" client 127.0.0.1 \
           --port "$port" --op "$op" --sizes "$sizes" --iters "$iters" --verify --no-progress \
           "${flags[@]}" >"$work/$name.client" 2>&1; then
        ok=1
        break
      fi
      grep -q "refused" "$work/$name.client" || break
    done
    wait "$server" || ok=0
    [ "$ok" = 1 ] || { fail "$name: uwarp-perf failed"; cat "$work/$name.client" "$work/$name.server" >&2; }
    for end in client server; do
      decode "$name-$end"
      [ "$crc" = crc ] && expect_found "$name-$end" "Good CRC32" "$work/$name-$end.decode.txt"
      # What the client sent, seen from both ends: the server's file has the same bytes received.
      case $op in
        send) expect_messages "$name-$end" Send 3 "$sent_messages" "$sent_bytes" ;;
        write) expect_messages "$name-$end" "RDMA Write" 0 "$sent_messages" "$sent_bytes" ;;
        read)
          expect_messages "$name-$end" "Read Request" 1 "$sent_messages" 0
          expect_messages "$name-$end" "Read Response" 2 "$sent_messages" "$sent_bytes" ;;
      esac
    done
    expect_same_totals "$name-client" "$name-server"
  done
done

# An unmodified program through uwarp-run --pcap, with MPA markers (1000-byte pings: a marker
# falls inside most FPDUs), without and with CRC: a file per process (%p).
if command -v rping >/dev/null; then
  for mpa in markers crc,markers; do
    name="rping-${mpa/,/-}"
    port=$((20000 + RANDOM % 20000))
    timeout 30 "$bin/uwarp-run" --mpa "$mpa" --pcap "$work/$name-server-%p.pcap" \
      rping -s -a 127.0.0.1 -p "$port" -C 3 -S 1000 -v >"$work/$name.server" 2>&1 &
    server=$!
    sleep 0.5
    checks=$((checks + 1))
    timeout 30 "$bin/uwarp-run" --mpa "$mpa" --pcap "$work/$name-client-%p.pcap" \
      rping -c -a 127.0.0.1 -p "$port" -C 3 -S 1000 -v >"$work/$name.client" 2>&1 &&
      wait "$server" || { fail "$name: rping failed"; cat "$work/$name.client" "$work/$name.server" >&2; }
    expect_found "$name" "rdma-ping-2" "$work/$name.client"
    for end in client server; do
      files=("$work/$name-$end"-*.pcap)
      checks=$((checks + 1))
      [ "${#files[@]}" = 1 ] && [ -e "${files[0]}" ] || { fail "$name: $end: not one capture: ${files[*]}"; continue; }
      mv "${files[0]}" "$work/$name-$end.pcap"
      decode "$name-$end"
      expect_found "$name-$end" "Marker flag: True" "$work/$name-$end.decode.txt"
      expect_found "$name-$end" "FPDU back pointer: [1-9][0-9]* bytes" "$work/$name-$end.decode.txt"
      [ "$mpa" = markers ] || expect_found "$name-$end" "Good CRC32" "$work/$name-$end.decode.txt"
      # rping: per ping a Send each way, an RDMA Read of the ping and an RDMA Write back.
      expect_messages "$name-$end" "Read Response" 2 3 3000
      expect_messages "$name-$end" "RDMA Write" 0 3 3000
    done
    expect_same_totals "$name-client" "$name-server"
  done
else
  echo "pcap_trace_check: rping (rdmacm-utils) not installed: uwarp-run --pcap not checked" >&2
fi

# A file that cannot be made: one clear error, and the run goes on untraced.
checks=$((checks + 1))
if UWARP_PCAP=/nonexistent-dir/x.pcap timeout 60 "$perf" loopback --op write --size 4K --iters 4 --no-progress \
     >"$work/nofile.out" 2>&1; then
  n=$(grep -c "uwarp: error: pcap: cannot open UWARP_PCAP file /nonexistent-dir/x.pcap" "$work/nofile.out" || true)
  [ "$n" = 1 ] || fail "unwritable UWARP_PCAP: expected one error line, got $n: $(head -5 "$work/nofile.out")"
else
  fail "unwritable UWARP_PCAP: uwarp-perf failed: $(tail -5 "$work/nofile.out")"
fi

echo "pcap_trace_check: $((checks - failures)) passed, $failures failed"
[ "$failures" -eq 0 ]
