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
run="$bin/uwarp-run"
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
cell "siw's Terminate for a Write to an unknown STag, reported by uwarp" default "-v -C 2" -- --count 1 --provoke-terminate
cell "peer-to-peer with CRC, 60000 B (rping maximum is 65535)" crc-p2p "-C 2 -S 60000" -- --count 2 --p2p --crc --size 60000

# ofa_cell NAME SIW_FLAVOUR "GUEST SERVER COMMAND" "HOST CLIENT COMMAND": unmodified programs,
# uwarp active (through uwarp-run) against siw passive.
ofa_cell() {
  local name=$1 flavour=$2 guest_cmd=$3 host_cmd=$4 attempts=${5:-1}
  port=$((port + 1))
  guest_cmd=${guest_cmd//PORT/$port}
  host_cmd=${host_cmd//PORT/$port}
  local client_rc=1 server_rc=1 attempt
  for ((attempt = 1; attempt <= attempts; attempt++)); do
    if ! "$harness" start --siw "$flavour" --fwd "$port" --timeout 90 -- "$guest_cmd" >"$work/start.log" 2>&1; then
      echo "siw_matrix: FAIL: $name: the guest did not start" >&2
      failed=$((failed + 1))
      return
    fi
    # shellcheck disable=SC2086
    timeout 90 "$run" $host_cmd >"$work/client.log" 2>&1
    client_rc=$?
    if [ $client_rc -ne 0 ] && [ $attempt -lt $attempts ] &&
        grep -q "RDMA_CM_EVENT_CONNECT_ERROR\|RDMA_CM_EVENT_REJECTED" "$work/client.log"; then
      # perftest -R's known race: its client can connect the test QP before the server
      # listens again. Only this failure is retried, with a fresh guest.
      "$harness" stop >/dev/null 2>&1
      echo "siw_matrix: $name: perftest connect race, retrying"
      continue
    fi
    timeout 150 "$harness" wait >"$work/server.log" 2>&1
    server_rc=$?
    break
  done
  if [ $client_rc -eq 0 ] && [ $server_rc -eq 0 ]; then
    echo "siw_matrix: ok: $name"
    passed=$((passed + 1))
  else
    echo "siw_matrix: FAIL: $name (uwarp $client_rc, siw $server_rc)" >&2
    tail -8 "$work/client.log" | sed 's/^/  uwarp: /' >&2
    grep -v '^\[' "$work/server.log" | tail -8 | sed 's/^/  siw: /' >&2
    failed=$((failed + 1))
  fi
}

# passive_cell NAME SIW_FLAVOUR "HOST SERVER COMMAND" "GUEST CLIENT COMMAND": siw active
# against uwarp passive (the guest reaches the host's loopback as $HOST_IP).
passive_cell() {
  local name=$1 flavour=$2 host_cmd=$3 guest_cmd=$4
  port=$((port + 1))
  host_cmd=${host_cmd//PORT/$port}
  guest_cmd=${guest_cmd//PORT/$port}
  # shellcheck disable=SC2086
  timeout 120 "$run" $host_cmd >"$work/server.log" 2>&1 &
  local server=$!
  sleep 1
  timeout 150 "$harness" run --siw "$flavour" --timeout 90 -- "$guest_cmd" >"$work/client.log" 2>&1
  local client_rc=$?
  wait "$server"
  local server_rc=$?
  if [ $client_rc -eq 0 ] && [ $server_rc -eq 0 ]; then
    echo "siw_matrix: ok: $name"
    passed=$((passed + 1))
  else
    echo "siw_matrix: FAIL: $name (siw $client_rc, uwarp $server_rc)" >&2
    grep -v '^\[' "$work/client.log" | tail -8 | sed 's/^/  siw: /' >&2
    tail -8 "$work/server.log" | sed 's/^/  uwarp: /' >&2
    failed=$((failed + 1))
  fi
}

if [ -x "$run" ] && [ -x /usr/bin/rping ]; then
  ofa_cell "uwarp-run rping -c -> siw rping -s" default \
    "rping -s -a \$GUEST_IP -p PORT -v -C 3" "rping -c -a 127.0.0.1 -p PORT -v -C 3"
  passive_cell "siw rping -c -> uwarp-run rping -s" default \
    "rping -s -a 0.0.0.0 -p PORT -v -C 3" "rping -c -a \$HOST_IP -p PORT -v -C 3"
  passive_cell "siw (crc) rping -c -> uwarp-run rping -s" crc \
    "rping -s -a 0.0.0.0 -p PORT -v -C 3" "rping -c -a \$HOST_IP -p PORT -v -C 3"
  passive_cell "siw (p2p, WRITE RTR) rping -c -> uwarp-run rping -s" p2p \
    "rping -s -a 0.0.0.0 -p PORT -v -C 3" "rping -c -a \$HOST_IP -p PORT -v -C 3"
  # MPA revision 1: siw's own server fails here (rev 1 carries no IRD/ORD, so siw's rping server
  # gets ORD 0 and cannot Read); uwarp answers rev 1 with its own IRD/ORD.
  passive_cell "siw (mpa1, MPA revision 1) rping -c -> uwarp-run rping -s" mpa1 \
    "rping -s -a 0.0.0.0 -p PORT -v -C 3" "rping -c -a \$HOST_IP -p PORT -v -C 3"
  passive_cell "siw (p2p-read, READ RTR) rping -c -> uwarp-run rping -s" p2p-read \
    "rping -s -a 0.0.0.0 -p PORT -v -C 3" "rping -c -a \$HOST_IP -p PORT -v -C 3"
  if [ -x /usr/bin/ib_write_bw ]; then
    for t in write read send; do
      ofa_cell "uwarp-run ib_${t}_bw -R -> siw" default \
        "ib_${t}_bw -R -d siw0 -p PORT -s 65536 -n 100" "ib_${t}_bw -R -p PORT -s 65536 -n 100 127.0.0.1" 3
    done
  fi
else
  echo "siw_matrix: unmodified-program cells SKIPPED: build/bin/uwarp-run or rdmacm-utils missing"
fi

echo "siw_matrix: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
