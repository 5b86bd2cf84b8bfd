# Shell helper for the scripts that run verbs_peer over uwarp on 127.0.0.1 (inject_uwarp.sh,
# verbs_peer_uwarp.sh). Source it with $bin set to the directory of uwarp-run and verbs_peer.

# peer_cmd [UWARP_RUN_ARGS...] -- VERBS_PEER_ARGS...: sets the array cmd to verbs_peer through
# uwarp-run; in sanitizer builds UWARP_OFA_PRELOAD (set by CMake) is preloaded into verbs_peer.
peer_cmd() {
  cmd=("$bin/uwarp-run")
  while [ "$1" != -- ]; do
    cmd+=("$1")
    shift
  done
  shift
  [ -n "${UWARP_OFA_PRELOAD:-}" ] && cmd+=(env LD_PRELOAD="$UWARP_OFA_PRELOAD")
  cmd+=("$bin/verbs_peer" "$@")
}
