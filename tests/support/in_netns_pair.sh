#!/usr/bin/env bash
# Runs a test binary whose connected pairs (tests/support/connected_pair.h) listen in one network
# namespace and connect from another, joined by a veth pair with a 1500-byte MTU: the two ends
# then talk over a real link, where TCP cuts the stream into 1448-byte segments, instead of
# loopback's 64 KiB.
#   in_netns_pair.sh BINARY [ARGS...]
# Exit status: the binary's; 77 (skipped, saying why) without root or iproute2.
set -uo pipefail

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: network namespaces need root (ip netns add)"
  exit 77
fi
if ! command -v ip >/dev/null; then
  echo "SKIP: iproute2 (ip) is not installed"
  exit 77
fi

server="uwarp_pair$$_s"
client="uwarp_pair$$_c"
cleanup() {
  ip netns del "$server" 2>/dev/null
  ip netns del "$client" 2>/dev/null
}
trap cleanup EXIT
trap 'exit 143' TERM INT

# Every address of the pair comes from its pid, so that pairs of tests run side by side by CTest
# do not meet (10.233.X.Y/30).
n=$(($$ % 16384))
server_ip="10.233.$((n / 64)).$(((n % 64) * 4 + 1))"
client_ip="10.233.$((n / 64)).$(((n % 64) * 4 + 2))"

ip netns add "$server" || { echo "SKIP: cannot create network namespaces here"; exit 77; }
ip netns add "$client" || exit 1
ip link add "uwp$$s" type veth peer name "uwp$$c" || exit 1
ip link set "uwp$$s" netns "$server" && ip link set "uwp$$c" netns "$client" || exit 1
ip -n "$server" link set lo up && ip -n "$client" link set lo up || exit 1
ip -n "$server" link set "uwp$$s" mtu 1500 up && ip -n "$client" link set "uwp$$c" mtu 1500 up || exit 1
ip -n "$server" addr add "$server_ip/30" dev "uwp$$s" || exit 1
ip -n "$client" addr add "$client_ip/30" dev "uwp$$c" || exit 1

echo "in_netns_pair: servers in $server ($server_ip), clients in $client ($client_ip), MTU 1500"
UWARP_TEST_NETNS="$server $client $server_ip" "$@"
