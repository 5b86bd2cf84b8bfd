# The guest side of siw_matrix.sh's shared guests (busybox sh, in the guest, cwd /share): runs
# the cells the host queues, one at a time, until the host queues "end".
#   sh /share/cell_runner.sh PORT...
# PORT...: the ports the host forwards to this guest. siw-vm.sh's start returns only once they
# listen, so placeholders (nc -l) hold them until the host writes q/go; the cells' own servers
# then listen on them.
# The queue, in /share/q: N (N = 1, 2, ...) holds "SCRIPT LIMIT [PORT]": run /share/SCRIPT for at
# most LIMIT seconds, its output to N.out; with PORT, N.ready appears once PORT listens (or the
# script has ended). N.rc holds the script's exit status; it appears last.
q=/share/q
holders=""
for p in "$@"; do
  nc -l -p "$p" >/dev/null 2>&1 &
  holders="$holders $!"
done
until [ -e $q/go ]; do sleep 0.05; done
[ -z "$holders" ] || kill $holders 2>/dev/null
wait

# listening PORT: true if a TCP socket listens on PORT.
listening() {
  awk -v p="$(printf '%04X' "$1")" 'NR > 1 && $4 == "0A" && substr($2, index($2, ":") + 1) == p { f = 1 }
    END { exit !f }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

n=1
while :; do
  until [ -e $q/$n ] || [ -e $q/end ]; do sleep 0.05; done
  [ -e $q/$n ] || break
  read -r script limit port <$q/$n
  dmesg -c >/dev/null  # a cell sees only its own kernel messages
  timeout -k 5 "$limit" sh "/share/$script" >$q/$n.out 2>&1 &
  pid=$!
  if [ -n "$port" ]; then
    until listening "$port" || ! kill -0 $pid 2>/dev/null; do sleep 0.05; done
    touch $q/$n.ready
  fi
  wait $pid
  echo $? >$q/$n.rc.part
  mv $q/$n.rc.part $q/$n.rc
  n=$((n + 1))
done
