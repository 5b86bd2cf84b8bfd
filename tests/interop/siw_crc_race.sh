#!/usr/bin/env bash
# A diagnostic, not part of CI: repeats the siw matrix's peer-to-peer and CRC cell (uwarp's
# rping_client --p2p --crc --size 60000 --count 2 against siw's `rping -s -C 2 -S 60000`, siw's
# crc-p2p flavour) over many connections in one guest, each captured on the guest's eth0, and
# stops at the first failure, keeping that connection's capture and logs and printing
# fpdu_crc.py's verdict on the CRCs each side sent (docs/interop.md, "siw's CRC over a payload
# twice").
#   tests/interop/siw_crc_race.sh [CONNECTIONS [BIN_DIR]]
# CONNECTIONS: at most this many (default 400; a connection takes about 2.5 s under TCG).
# SIW_CRC_RACE_KEEP=DIR: where a failed connection's files go (default ./siw-crc-race).
# SIW_CRC_RACE_LOAD=N: N busy loops in the guest meanwhile (default 0).
# Exit status: 0 every connection passed; 1 one failed (its files kept); 2 the guest did not run.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
connections=${1:-400}
bin=$(cd "${2:-$root/build/bin}" && pwd)
harness=${SIW_VM:-$root/../shared/interop/siw-vm.sh}
keep=${SIW_CRC_RACE_KEEP:-$PWD/siw-crc-race}
port=${SIW_CRC_RACE_PORT:-7380}
[ -x "$harness" ] || { echo "siw_crc_race: the siw harness is not at $harness" >&2; exit 2; }
[ -x "$bin/rping_client" ] || { echo "siw_crc_race: $bin/rping_client missing" >&2; exit 2; }
share=$(mktemp -d)
vm=(--name "crc-race-$port")
trap '"$harness" stop "${vm[@]}" >/dev/null 2>&1; rm -rf "$share"' EXIT

# The guest: connection after connection, each with its capture; N.ready once rping -s listens;
# the host writes N.verdict (ok or fail); a failed connection's capture stays in the share.
cat >"$share/guest.sh" <<EOF
ulimit -l unlimited
i=0
while [ \$i -lt ${SIW_CRC_RACE_LOAD:-0} ]; do sh -c 'while :; do :; done' & i=\$((i + 1)); done
n=1
while [ \$n -le $connections ]; do
  capture start /share/\$n.pcap eth0 -B 65536 tcp port $port >/dev/null || exit 97
  wait-listen -g $port 10
  rping -s -a \$GUEST_IP -p $port -C 2 -S 60000 >/share/\$n.siw.log 2>&1 &
  server=\$!
  wait-listen $port 10 && touch /share/\$n.ready
  wait \$server
  echo "rping -s exit status \$?" >>/share/\$n.siw.log
  capture stop /share/\$n.pcap >>/share/\$n.siw.log
  t=0
  until [ -e /share/\$n.verdict ] || [ \$t -ge 1200 ]; do sleep 0.05; t=\$((t + 1)); done
  if [ "\$(cat /share/\$n.verdict 2>/dev/null)" != ok ]; then
    dmesg | grep -E 'siw|iw_cm' | tail -8 >>/share/\$n.siw.log
    exit 1
  fi
  rm -f /share/\$n.*
  n=\$((n + 1))
done
EOF
if ! "$harness" start "${vm[@]}" --siw crc-p2p --share "$share" --fwd "$port" \
     --timeout $((connections * 12 + 60)) --script "$share/guest.sh" >"$share/start.log" 2>&1; then
  tail -5 "$share/start.log" >&2
  echo "siw_crc_race: the guest did not start" >&2
  exit 2
fi
start=$SECONDS
failed=0
for ((n = 1; n <= connections; n++)); do
  t=0
  while [ ! -e "$share/$n.ready" ] && [ $t -lt 600 ]; do sleep 0.05; t=$((t + 1)); done
  if [ ! -e "$share/$n.ready" ]; then
    echo "siw_crc_race: connection $n: siw's rping -s did not listen" >&2
    failed=2
    break
  fi
  if UWARP_IBVERBS_DEBUG=1 timeout 60 "$bin/rping_client" --port "$port" --count 2 --p2p --crc --size 60000 \
       >"$share/$n.uwarp.log" 2>&1; then
    echo ok >"$share/$n.verdict"
  else
    echo fail >"$share/$n.verdict"
    failed=1
    break
  fi
  [ $((n % 50)) -ne 0 ] || echo "siw_crc_race: $n connections passed ($((SECONDS - start)) s)"
done
"$harness" wait "${vm[@]}" >"$share/guest.console" 2>&1
if [ $failed = 1 ]; then
  mkdir -p "$keep"
  for f in pcap siw.log uwarp.log; do cp "$share/$n.$f" "$keep/$n.$f" 2>/dev/null; done
  echo "siw_crc_race: connection $n of $connections failed after $((SECONDS - start)) s; files in $keep"
  grep -v '^ping data' "$share/$n.uwarp.log" | tail -5 | sed 's/^/  uwarp: /'
  sed 's/^/  siw: /' "$share/$n.siw.log" | tail -8
  python3 "$root/tests/interop/fpdu_crc.py" "$keep/$n.pcap" --src "$port" | sed 's/^/  siw: /'
  python3 "$root/tests/interop/fpdu_crc.py" "$keep/$n.pcap" --dst "$port" | sed 's/^/  uwarp: /'
  exit 1
fi
[ $failed = 0 ] || exit 2
echo "siw_crc_race: $connections connections passed ($((SECONDS - start)) s)"
