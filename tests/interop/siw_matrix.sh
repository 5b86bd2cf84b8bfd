#!/usr/bin/env bash
# uwarp against the real Linux siw: boots siw in QEMU with ../shared/interop/siw-vm.sh (from
# where it stands; never copied) and runs rping's protocol between a siw `rping -s` in the guest
# and uwarp's rping_client on the host, one cell per connection mode. Each cell checks the
# client's verified data and the exit status of siw's rping.
#   tests/interop/siw_matrix.sh [BIN_DIR]
# It is skipped, saying why, where the harness is absent; it fails if the harness cannot build.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-$root/build/bin}
harness=${SIW_VM:-$root/../shared/interop/siw-vm.sh}
if [ ! -x "$harness" ]; then
  echo "siw_matrix: SKIPPED: the siw harness is not at $harness"
  exit 0
fi
client="$bin/rping_client"
[ -x "$client" ] || { echo "siw_matrix: $client missing" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"; "$harness" stop >/dev/null 2>&1 || true' EXIT

echo "siw_matrix: building the guest (cached after the first time)"
if ! timeout 900 "$harness" build >"$work/build.log" 2>&1; then
  tail -20 "$work/build.log" >&2
  echo "siw_matrix: FAIL: the siw guest did not build" >&2
  exit 1
fi

passed=0
failed=0
port=7174
# cell NAME SIW_FLAVOUR RPING_SERVER_ARGS -- CLIENT_ARGS
cell() {
  local name=$1 flavour=$2 server_args=$3
  shift 4
  port=$((port + 1))
  if ! "$harness" start --siw "$flavour" --fwd "$port" --timeout 60 -- \
      "rping -s -a \$GUEST_IP -p $port $server_args" >"$work/start.log" 2>&1; then
    cat "$work/start.log" >&2
    echo "siw_matrix: FAIL: $name: the guest did not start" >&2
    failed=$((failed + 1))
    return
  fi
  timeout 90 "$client" --port "$port" "$@" >"$work/client.log" 2>&1
  local client_rc=$?
  timeout 120 "$harness" wait >"$work/server.log" 2>&1
  local server_rc=$?
  if [ $client_rc -eq 0 ] && [ $server_rc -eq 0 ] && grep -q "iterations verified" "$work/client.log"; then
    echo "siw_matrix: ok: $name"
    passed=$((passed + 1))
  else
    echo "siw_matrix: FAIL: $name (client $client_rc, siw rping $server_rc)" >&2
    sed 's/^/  client: /' "$work/client.log" >&2
    grep -v '^\[' "$work/server.log" | tail -8 | sed 's/^/  siw: /' >&2
    failed=$((failed + 1))
  fi
}

cell "MPA rev 2, no CRC, 64 B x 3" default "-v -C 3" -- --count 3
cell "MPA rev 2, uwarp asks for CRC" default "-v -C 3" -- --count 3 --crc
cell "peer-to-peer, WRITE RTR" default "-v -C 3" -- --count 3 --p2p
cell "siw asking for CRC (crc flavour), 32 KiB" crc "-v -C 2 -S 32768" -- --count 2 --crc --size 32768
cell "peer-to-peer with CRC, 60000 B (rping maximum is 65535)" crc-p2p "-C 2 -S 60000" -- --count 2 --p2p --crc --size 60000

echo "siw_matrix: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
