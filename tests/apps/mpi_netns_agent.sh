#!/usr/bin/env bash
# Stands in for ssh as Open MPI's remote launcher (mpirun --mca plm_rsh_agent THIS_SCRIPT) when
# the "hosts" are network namespaces of one machine: mpirun calls it as it would call ssh,
#   mpi_netns_agent.sh HOST COMMAND...
# and it runs COMMAND in HOST's namespace (ip netns exec, so it needs root), through sh -c with
# the words joined by spaces, as ssh's remote shell would. UWARP_MPI_NETNS maps each host, as
# mpirun names it (an address or a name of --host or the hostfile), to its namespace:
#   UWARP_MPI_NETNS="10.236.0.1=nsA 10.236.0.2=nsB"
# Exit status: COMMAND's; 255 (as ssh) when HOST is not in the map or the namespace is missing.
set -uo pipefail

# ssh options mpirun may put before the host (none by default) are accepted and ignored.
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do
  shift
done
if [ $# -lt 2 ]; then
  echo "usage: mpi_netns_agent.sh HOST COMMAND... (with UWARP_MPI_NETNS=\"HOST=NAMESPACE ...\")" >&2
  exit 255
fi
host=$1
shift
ns=
for entry in ${UWARP_MPI_NETNS:-}; do
  if [ "${entry%%=*}" = "$host" ]; then
    ns=${entry#*=}
  fi
done
if [ -z "$ns" ]; then
  echo "mpi_netns_agent.sh: host $host is not in UWARP_MPI_NETNS (\"${UWARP_MPI_NETNS:-}\")" >&2
  exit 255
fi
if [ ! -e "/run/netns/$ns" ]; then
  echo "mpi_netns_agent.sh: there is no network namespace $ns (host $host)" >&2
  exit 255
fi
exec ip netns exec "$ns" sh -c "$*"
