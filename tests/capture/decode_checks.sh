# Sourced by tshark_check.sh and pcap_trace_check.sh: counting checks, and what every capture of
# uwarp traffic must satisfy once tshark has decoded it. The sourcing script sets `tag` (its
# name in messages), `work` (its scratch directory) and `keep` (where to copy what it decoded,
# or empty), and reads `checks` and `failures` at the end.
failures=0
checks=0

fail() {
  echo "$tag: FAIL: $*" >&2
  failures=$((failures + 1))
}
expect_found() {  # expect_found LABEL PATTERN FILE
  checks=$((checks + 1))
  grep -q -- "$2" "$3" || fail "$1: no '$2' in $(basename "$3")"
}
expect_absent() {  # expect_absent LABEL PATTERN FILE
  checks=$((checks + 1))
  if grep -qi -- "$2" "$3"; then fail "$1: '$2' in $(basename "$3"): $(grep -i -m3 -- "$2" "$3" | tr '\n' ' ')"; fi
}

# check_decoded NAME: decodes $work/NAME.pcap into $work/NAME.{decode,list}.txt and checks it:
# no "Malformed", no "Bad CRC32", the MPA request and reply, and no data-carrying segment left
# as plain TCP (not MPA/DDP, not a reassembly fragment): one the iWARP dissectors could not
# claim. A TCP retransmission repeats bytes already decoded in the original segment, and tshark
# does not dissect it again.
check_decoded() {
  local name=$1 decode="$work/$1.decode.txt" list="$work/$1.list.txt"
  tshark --disable-heuristic rpcrdma_iwarp --disable-protocol enip -r "$work/$name.pcap" -O iwarp_mpa,iwarp_ddp_rdmap >"$decode" 2>&1
  tshark --disable-heuristic rpcrdma_iwarp --disable-protocol enip -r "$work/$name.pcap" >"$list" 2>&1
  echo "$tag: $name: $(grep -c . "$list" || true) frames"
  expect_absent "$name" "malformed" "$decode"
  expect_absent "$name" "Bad CRC" "$decode"
  expect_absent "$name" "cut short" "$list"
  expect_found "$name" "MPA Request Frame" "$list"
  expect_found "$name" "MPA Reply Frame" "$list"
  checks=$((checks + 1))
  local undecoded
  undecoded=$(awk '$6 == "TCP" && / Len=[1-9]/ && !/reassembled PDU/ && !/Retransmission\]/' "$list" | head -5)
  [ -z "$undecoded" ] || fail "$name: segments not decoded as iWARP: $undecoded"
  if [ -n "$keep" ]; then mkdir -p "$keep"; cp "$work/$name.pcap" "$decode" "$list" "$keep/"; fi
}
