# Shell helpers for tests that start servers on loopback ports. Source it; needs ss (iproute2).

# free_port: prints a port nobody listens on, different per run: from 22000 to 32767, above the
# fixed ports of tests/ofa (21xxx), which may start listening beside it under `ctest -j`, and
# below Linux's ephemeral range (32768 and up), where any connection may hold the port.
free_port() {
  local p i
  for i in $(seq 1 50); do
    p=$((22000 + (RANDOM % 10768)))
    [ -z "$(ss -Hltn "sport = :$p" 2>/dev/null)" ] && echo "$p" && return 0
  done
  return 1
}

# end_server PID SECONDS: waits up to SECONDS for the server PID (a child of this shell) to end
# on its own, stops it then; returns its exit status (143 when it had to be stopped).
end_server() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.1
  done
  kill "$1" 2>/dev/null
  wait "$1"
}

# wait_listen PORT [PID]: waits (up to 10 s) until a TCP socket listens on PORT, in network
# namespace $NS if that is set; gives up at once when the server PID (if given) has ended.
wait_listen() {
  local i pre=()
  [ -n "${NS:-}" ] && pre=(ip netns exec "$NS")
  for i in $(seq 1 200); do
    [ -n "$("${pre[@]}" ss -Hltn "sport = :$1" 2>/dev/null)" ] && return 0
    [ -z "${2:-}" ] || kill -0 "$2" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
