#!/usr/bin/env bash
# verbs_peer's whole lock-step script (tests/interop/verbs_peer.c) with uwarp at both ends, on
# 127.0.0.1: the same binary the siw matrix runs against siw, here through uwarp-run twice.
# Every size's Send, Write and Read verified, the zero-length operations, the solicited event
# (delivered for a Send with Solicited Event, none for a plain Send under a solicited-only arm)
# and the invalidation a Send with Invalidate reports (uwarp reports it: it must name the
# advertised rkey).
#
# Usage: verbs_peer_uwarp.sh BIN_DIR (with uwarp-run and verbs_peer)
# In sanitizer builds UWARP_OFA_PRELOAD (set by CMake) is preloaded into verbs_peer.
# Exit 0 on success, 1 on a failure, 77 (skipped) without verbs_peer.
set -uo pipefail
bin=$1
# shellcheck source=../support/ports.sh
. "$(dirname "$0")/../support/ports.sh"
# shellcheck source=peer_cmd.sh
. "$(dirname "$0")/peer_cmd.sh"
for b in uwarp-run verbs_peer; do
  [ -x "$bin/$b" ] || { echo "SKIP: $bin/$b not built"; exit 77; }
done

tmp=$(mktemp -d /tmp/uwarp-verbs-peer.XXXXXX)
server=
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
failed=0
fail() {
  echo "FAIL: $*"
  failed=1
}

port=$(free_port) || { echo "FAIL: no free port"; exit 1; }
peer_cmd -- server -a 127.0.0.1 -p "$port" -t 20
timeout 120 "${cmd[@]}" > "$tmp/server.log" 2>&1 &
server=$!
wait_listen "$port" "$server" || fail "verbs_peer's server does not listen"
peer_cmd -- client -a 127.0.0.1 -p "$port" -s 1,4096,65536,1048576 -t 20
timeout 120 "${cmd[@]}" > "$tmp/client.log" 2>&1
client_rc=$?
end_server "$server" 20
server_rc=$?
server=

[ "$client_rc" = 0 ] || fail "verbs_peer client exit $client_rc"
[ "$server_rc" = 0 ] || fail "verbs_peer server exit $server_rc"
expect() {
  grep -qE -- "$2" "$tmp/$1" || fail "$1: no line matching '$2'"
}
expect client.log "zero-length Send, RDMA Write, RDMA Read completed"
expect server.log "Send with Solicited Event, receive CQ armed for solicited only: event delivered"
expect server.log "plain Send, receive CQ armed for solicited only: event not delivered"
expect server.log "Send with Invalidate: .*IBV_WC_WITH_INV set.*: match"
if [ "$failed" != 0 ]; then
  echo "--- server:"; cat "$tmp/server.log"
  echo "--- client:"; cat "$tmp/client.log"
  exit 1
fi
echo "verbs_peer over uwarp at both ends: every step passed"
