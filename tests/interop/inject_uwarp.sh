#!/usr/bin/env bash
# uwarp's answers to the injected faults of the siw matrix (docs/interop.md, "Injected faults"):
# the same raw injector (siw_inject --peer uwarp) against the same verbs_peer binary, run over
# uwarp through uwarp-run on 127.0.0.1 instead of over siw in the guest. siw_inject checks every
# Terminate byte for byte against RFC 5040's layout; this script checks its verdicts and what
# verbs_peer's application saw.
#
# Usage: inject_uwarp.sh BIN_DIR (with uwarp-run, siw_inject and verbs_peer)
# In sanitizer builds UWARP_OFA_PRELOAD (set by CMake) is preloaded into verbs_peer.
# Exit 0 on success, 1 on a failure, 77 (skipped) without verbs_peer (Debian's libibverbs-dev
# and librdmacm-dev at build time).
set -uo pipefail
bin=$1
# shellcheck source=../support/ports.sh
. "$(dirname "$0")/../support/ports.sh"
# shellcheck source=peer_cmd.sh
. "$(dirname "$0")/peer_cmd.sh"
for b in uwarp-run siw_inject verbs_peer; do
  if [ ! -x "$bin/$b" ]; then
    echo "SKIP: $bin/$b not built"
    exit 77
  fi
done

tmp=$(mktemp -d /tmp/uwarp-inject.XXXXXX)
pids=()
failed=0
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  if [ -n "${UWARP_KEEP_OUTPUT:-}" ]; then echo "outputs kept in $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
  echo "FAIL: $*"
  failed=$((failed + 1))
}
# expect FILE PATTERN WHAT: FILE has a line matching the extended regex PATTERN.
expect() {
  grep -qE -- "$2" "$1" || fail "$3: no line matching '$2' in $(basename "$1")"
}

export UWARP_IBVERBS_DEBUG=1  # async events name their reason (the Terminate sent)

# connect_cell NAME CONNECTIONS INJECTOR_ARGS...: verbs_peer's server over uwarp, siw_inject
# connecting to it. Leaves $tmp/NAME.server.log and $tmp/NAME.inject.log.
connect_cell() {
  local name=$1 conns=$2 port
  shift 2
  port=$(free_port) || { fail "$name: no free port"; return; }
  peer_cmd -- server -p "$port" -i 0 -c "$conns" -t 20
  timeout 120 "${cmd[@]}" > "$tmp/$name.server.log" 2>&1 &
  local server=$!
  pids+=("$server")
  wait_listen "$port" || { fail "$name: verbs_peer server does not listen"; return; }
  timeout 180 "$bin/siw_inject" connect --peer uwarp --port "$port" "$@" > "$tmp/$name.inject.log" 2>&1 ||
    fail "$name: siw_inject exit $?"
  wait "$server"
  local rc=$?
  [ "$rc" -lt 124 ] || fail "$name: verbs_peer server exit $rc (timeout or signal)"
  echo "$name: siw_inject: $(tail -1 "$tmp/$name.inject.log")"
}

# verdicts NAME FAULTS: siw_inject said "ok" for every fault of the comma-separated list.
verdicts() {
  local f
  for f in ${2//,/ }; do expect "$tmp/$1.inject.log" "^siw_inject: $f: ok$" "$1: $f"; done
}

# 1. Frames after verbs_peer's hellos, and MPA requests (MPA revision 2, no CRC). uwarp takes the
# request with 257 bytes of private data (RFC 5044 allows 512), which verbs_peer then sees
# break off: it runs last, so that verbs_peer's count of connections ends with it. The same for
# the request asking for markers (uwarp sends them), in a cell of its own.
frames=send-bad-qn,send-bad-msn,send-bad-mo,read-bad-msn,read-bad-qn,read-ird-0,read-beyond-ird,ddp-version-tagged,ddp-version-untagged,rdmap-version,opcode-unknown,opcode-atomic,write-to-wrap,write-segment-stag,write-segment-to,rresp-unsolicited,fpdu-short,terminate,terminate-short,terminate-bad-layer,terminate-bad-qn
refused=mpa-bad-key,mpa-revision-3
connect_cell frames 22 --faults "$refused,$frames,mpa-pd-257"
verdicts frames "$refused,$frames,mpa-pd-257"
connect_cell markers 1 --faults mpa-markers
verdicts markers mpa-markers
log=$tmp/frames.server.log
for f in ${frames//,/ }; do
  expect "$log" "inject $f: error reported: yes, disconnected" "frames: $f (verbs_peer)"
done
# section FAULT: what verbs_peer's server printed for one fault.
section() {
  awk -v f="$1" '$0 ~ "inject " f ": waiting" {on = 1; next} /inject [a-z0-9-]*: waiting/ {on = 0} on' "$log"
}
# What the application saw, by fault (docs/errors.md): the posted receive flushed, and an
# asynchronous event naming the Terminate uwarp sent, or the one it received.
for f in ${frames//,/ }; do
  section "$f" > "$tmp/$f.lines"
  case $f in
    write-segment-to) ;;
    terminate) event="async event QP access error, .*: peer sent Terminate, control word 0x01000000" ;;
    terminate-short) event="async event .*: peer sent Terminate without a control word" ;;
    terminate-bad-layer) event="async event .*: peer sent Terminate, control word 0x30000000" ;;
    *) event="async event .*: sent Terminate" ;;
  esac
  expect "$tmp/$f.lines" "Work Request Flushed Error \(5\), opcode 128" "frames: $f: receive flushed"
  [ "$f" = write-segment-to ] || expect "$tmp/$f.lines" "uwarp: debug: ibverbs: $event" "frames: $f: async event"
done
if grep -q "sent Terminate" "$tmp/write-segment-to.lines"; then
  fail "frames: write-segment-to: uwarp sent a Terminate for a segment DDP places by its own STag and TO"
fi

# 2. CRC and MPA revision 1: a CRC mismatch, and Terminates with their CRC.
crc_faults=crc-bad,send-bad-msn,ddp-version-tagged
connect_cell crc 3 --crc --mpa1 --faults "$crc_faults"
verdicts crc "$crc_faults"
expect "$tmp/crc.server.log" "sent Terminate LLP/0/0x02" "crc: crc-bad"

# 3. uwarp initiating: MPA replies it refuses (verbs_peer's client asks for peer-to-peer). A reply
# asking for markers is not among them: uwarp sends markers then.
reply_faults=reply-bad-key,reply-ord-200,reply-no-rtr
port=$(free_port) || fail "replies: no free port"
timeout 120 "$bin/siw_inject" listen --peer uwarp --port "$port" --faults "$reply_faults" \
  > "$tmp/replies.inject.log" 2>&1 &
injector=$!
pids+=("$injector")
wait_listen "$port" || fail "replies: siw_inject does not listen"
for f in ${reply_faults//,/ }; do
  peer_cmd --mpa p2p -- client -a 127.0.0.1 -p "$port" -s 1 -r 0 -t 15
  timeout 30 "${cmd[@]}" > "$tmp/replies.$f.log" 2>&1
  rc=$?
  [ "$rc" = 1 ] || fail "replies: $f: verbs_peer client exit $rc, expected 1"
  expect "$tmp/replies.$f.log" "waiting for RDMA_CM_EVENT_ESTABLISHED, got RDMA_CM_EVENT_CONNECT_ERROR" \
    "replies: $f: connect error"
done
wait "$injector" || fail "replies: siw_inject exit $?"
echo "replies: siw_inject: $(tail -1 "$tmp/replies.inject.log")"
verdicts replies "$reply_faults"

if [ "$failed" -ne 0 ]; then
  for f in "$tmp"/*.inject.log; do
    grep -E "MISMATCH|FAILED" "$f" | sed "s|^|$(basename "$f"): |"
  done
  echo "inject_uwarp: $failed failure(s)"
  exit 1
fi
echo "inject_uwarp: all passed"
