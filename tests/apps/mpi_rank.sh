#!/usr/bin/env bash
# Runs one MPI rank over uwarp with what Open MPI over libfabric needs of uwarp today (README.md,
# "Using uwarp with libfabric and MPI", known problems): "localhost" is this host's address in
# NETWORK. The rank runs in a mount namespace of its own whose /etc/hosts says so. libfabric's
# verbs provider binds "localhost" to find the address it advertises to the other ranks; the
# kernel leaves a loopback-bound id without a device, and the provider then takes the device's
# own addresses, but uwarp gives such an id its device, and the provider would advertise
# 127.0.0.1.
# Give it to mpirun after uwarp-run (which puts uwarp's libraries on the library path):
#   mpirun ... uwarp-run tests/apps/mpi_rank.sh NETWORK PROGRAM [ARGS...]
# NETWORK is the IPv4 network between the hosts (e.g. 192.0.2.0/24). Needs unshare(1) and
# mount(8) (util-linux) and, for another user than root, unprivileged user namespaces.
# Exit status: PROGRAM's; 127 when this host has no address in NETWORK or the mount namespace
# cannot be made.
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: uwarp-run mpi_rank.sh NETWORK PROGRAM [ARGS...]" >&2
  exit 127
fi
net=$1
shift
addr=$(ip -4 -o addr show to "$net" 2>/dev/null | awk '{ sub(/\/.*/, "", $4); print $4; exit }')
if [ -z "$addr" ]; then
  echo "mpi_rank.sh: this host has no IPv4 address in $net" >&2
  exit 127
fi
hosts=$(mktemp /tmp/uwarp-mpi-hosts.XXXXXX) || exit 127
echo "$addr localhost" >"$hosts"
# Root makes the mount namespace itself; another user gets one in a user namespace of its own.
user=()
[ "$(id -u)" -eq 0 ] || user=(--map-root-user)
# The bind mount keeps the file's contents after it is removed.
exec unshare "${user[@]}" --mount --propagation private -- sh -c '
  hosts=$1
  shift
  if ! mount --bind "$hosts" /etc/hosts; then
    rm -f "$hosts"
    echo "mpi_rank.sh: cannot mount a hosts file of its own on /etc/hosts" >&2
    exit 127
  fi
  rm -f "$hosts"
  exec "$@"' sh "$hosts" "$@"
