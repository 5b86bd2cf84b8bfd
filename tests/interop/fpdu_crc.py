#!/usr/bin/python3
"""tests/interop/fpdu_crc.py: checks the MPA CRC of every FPDU one side of a captured iWARP
connection sent, with a CRC32c of its own (a table, not uwarp's code), and says what each wrong
one covered.

  tests/interop/fpdu_crc.py PCAP --src PORT | --dst PORT
  tests/interop/fpdu_crc.py --self-test

--src PORT: the side whose segments leave from PORT (siw as the passive side in the guest's
capture); --dst PORT: the side whose segments go to PORT (siw as the active side). The script
rebuilds that side's TCP byte stream from tshark's fields (the first copy of a retransmitted byte
counts), skips its MPA request or reply, walks the FPDUs (no markers), and prints one line per
FPDU whose CRC field differs from the CRC32c over its bytes. A wrong CRC that equals the CRC32c
over the FPDU's header and then its payload (with its pad) twice is "payload twice": what
Linux 6.1 siw was seen to send, about once in 400 to 1,500 connections under TCG
(docs/interop.md, "siw's CRC over a payload twice").

Exit status: 0 every FPDU's CRC is right (or the connection has no CRC); 3 some are wrong, every
one of them "payload twice"; 1 some are wrong otherwise; 2 the capture cannot be analysed (tshark
missing, a gap in the stream, no MPA frame).
--self-test writes a small capture (one right FPDU, one "payload twice", one otherwise wrong)
and checks the verdicts; exit 77 (skipped) without tshark.
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile


def _table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


_T = _table()


def crc32c(data, crc=0):
    c = crc ^ 0xFFFFFFFF
    for b in data:
        c = _T[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


MPA_KEYS = (b"MPA ID Req Frame", b"MPA ID Rep Frame")
RDMAP_OPS = {0: "RDMA Write", 1: "Read Request", 2: "Read Response", 3: "Send", 4: "Send with Invalidate",
             5: "Send with SE", 6: "Send with SE and Invalidate", 7: "Terminate", 8: "Write with Immediate",
             9: "Immediate Data", 10: "Immediate Data with SE"}


def streams(pcap):
    """{(srcport, dstport): (bytes, [(frame, start, length)])} for every direction with data."""
    out = subprocess.run(["tshark", "-r", pcap, "-Y", "tcp.len > 0", "-T", "fields", "-e", "frame.number",
                          "-e", "tcp.srcport", "-e", "tcp.dstport", "-e", "tcp.seq", "-e", "tcp.payload"],
                         capture_output=True, text=True, check=True).stdout
    pieces = {}
    for line in out.splitlines():
        f = line.split("\t")
        if len(f) < 5 or not f[4]:
            continue
        pieces.setdefault((int(f[1]), int(f[2])), []).append((int(f[0]), int(f[3]), bytes.fromhex(f[4].replace(":", ""))))
    result = {}
    for key, segs in pieces.items():
        base = min(seq for _, seq, _ in segs)
        data = bytearray()
        frames = []
        for frame, seq, payload in sorted(segs, key=lambda x: (x[1], x[0])):
            start = seq - base
            frames.append((frame, start, len(payload)))
            if start > len(data):
                raise ValueError(f"ports {key[0]}->{key[1]}: {start - len(data)} bytes missing at offset {len(data)}")
            data += payload[len(data) - start:]  # the first copy of a retransmitted byte counts
        result[key] = (bytes(data), sorted(frames))
    return result


def one_side(pcap, src=None, dst=None):
    """(ports, stream, frames, every stream): the one direction whose segments leave from `src`
    or go to `dst` (as streams() gives them)."""
    all_streams = streams(pcap)
    mine = [k for k in all_streams if (src is not None and k[0] == src) or (dst is not None and k[1] == dst)]
    if len(mine) != 1:
        raise ValueError(f"{len(mine)} TCP streams with data match the port (one expected)")
    return mine[0], *all_streams[mine[0]], all_streams


def mpa_frame_length(s):
    if len(s) < 20 or s[:16] not in MPA_KEYS:
        return None
    return 20 + struct.unpack(">H", s[18:20])[0]


def analyse(pcap, src=None, dst=None):
    """(verdict, lines): verdict 0 right, 3 all wrong ones "payload twice", 1 otherwise wrong."""
    ports, s, frames, all_streams = one_side(pcap, src, dst)
    other = all_streams.get((ports[1], ports[0]), (b"", []))[0]
    start = mpa_frame_length(s)
    if start is None:
        raise ValueError("the side's stream does not start with an MPA request or reply")
    reply = s if s[:16] == MPA_KEYS[1] else other
    if mpa_frame_length(reply) is None or reply[:16] != MPA_KEYS[1]:
        raise ValueError("no MPA reply in the capture")
    if not reply[16] & 0x40:
        return 0, ["fpdu_crc: the MPA reply has no C flag: no CRC in use"]

    def frames_of(a, b):
        hit = [f for f, off, ln in frames if off < b and a < off + ln]
        return f"frame {hit[0]}" if len(hit) == 1 else f"frames {hit[0]}-{hit[-1]}" if hit else "no frame"

    lines = []
    off = start
    count = wrong = twice = 0
    while off + 2 <= len(s):
        ulpdu = struct.unpack(">H", s[off:off + 2])[0]
        pad = -(2 + ulpdu) % 4
        end = off + 2 + ulpdu + pad + 4
        if end > len(s):
            lines.append(f"fpdu_crc: the stream ends inside an FPDU at offset {off} ({len(s) - off} of {end - off} bytes)")
            break
        count += 1
        body = s[off:end - 4]
        on_wire = struct.unpack("<I", s[end - 4:end])[0]
        right = crc32c(body)
        if on_wire != right:
            wrong += 1
            ctrl = s[off + 2] if ulpdu >= 2 else 0
            header = 2 + (14 if ctrl & 0x80 else 18)
            header = min(header, 2 + ulpdu)
            payload = s[off + header:off + 2 + ulpdu]
            zeros = bytes(pad)
            doubled = crc32c(body + payload + zeros), crc32c(s[off:off + header] + payload + payload + zeros + zeros)
            op = RDMAP_OPS.get(s[off + 3] & 0x0F, "?") if ulpdu >= 2 else "?"
            what = f"{op}, {'tagged' if ctrl & 0x80 else 'untagged'}, ULPDU {ulpdu} ({len(payload)} payload bytes)"
            if on_wire in doubled:
                twice += 1
                verdict = "payload twice: the CRC over its header and its payload twice"
            else:
                verdict = "not the CRC over any of its bytes tried"
            lines.append(f"fpdu_crc: wrong CRC at stream offset {off} ({frames_of(off, end)}): {what}: "
                         f"CRC field {on_wire:#010x}, CRC32c {right:#010x}; {verdict}")
        off = end
    lines.append(f"fpdu_crc: ports {ports[0]}->{ports[1]}: {count} FPDUs, {wrong} with a wrong CRC"
                 + (f", {twice} of them payload twice" if wrong else ""))
    return (0 if wrong == 0 else 3 if twice == wrong else 1), lines


# --- self-test -------------------------------------------------------------------------------

def _pcap(path, segments):
    """A pcap of Ethernet/IPv4/TCP segments: (srcport, dstport, seq, payload)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, (sp, dp, seq, payload) in enumerate(segments):
            tcp = struct.pack(">HHIIBBHHH", sp, dp, seq, 1, 5 << 4, 0x18, 65535, 0, 0)
            ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + len(payload), i, 0, 64, 6, 0,
                             bytes([10, 0, 2, 15 if sp != 7 else 2]), bytes([10, 0, 2, 2 if sp != 7 else 15]))
            frame = b"\x52\x54\x00\x12\x34\x56\x52\x55\x0a\x00\x02\x02\x08\x00" + ip + tcp + payload
            f.write(struct.pack("<IIII", i, 0, len(frame), len(frame)) + frame)


def _passive_segments(request, stream):
    """The segments of a connection whose side on port 7 is passive: `request` comes in from
    port 1000, `stream` (its reply and FPDUs) goes out in 1000-byte segments."""
    return [(1000, 7, 1, request)] + [(7, 1000, 1 + i, stream[i:i + 1000]) for i in range(0, len(stream), 1000)]


def _fpdu(payload, crc=None, twice=False):
    header = struct.pack(">HBBIQ", 14 + len(payload), 0x81, 0x40, 0x1234, 0x1000)
    body = header + payload + bytes(-(len(header) + len(payload)) % 4)
    if twice:
        crc = crc32c(header + payload + payload)
    return body + struct.pack("<I", crc32c(body) if crc is None else crc)


def self_test():
    if not shutil.which("tshark"):
        print("fpdu_crc: SKIPPED: tshark is not installed")
        return 77
    assert crc32c(b"123456789") == 0xE3069283, "CRC32c check value"
    request = MPA_KEYS[0] + bytes([0x40, 0, 0, 0])
    reply = MPA_KEYS[1] + bytes([0x40, 0, 0, 0])
    payload = bytes(range(256)) * 4
    cases = [("right", [_fpdu(payload)], 0), ("payload twice", [_fpdu(payload), _fpdu(payload, twice=True)], 3),
             ("otherwise wrong", [_fpdu(payload, twice=True), _fpdu(payload, crc=0x12345678)], 1)]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, fpdus, want in cases:
            stream = reply + b"".join(fpdus)
            # the last segment sent twice (a retransmission)
            segs = _passive_segments(request, stream)
            segs.append(segs[-1])
            path = os.path.join(tmp, "t.pcap")
            _pcap(path, segs)
            got, lines = analyse(path, src=7)
            ok = got == want
            failures += not ok
            print(f"fpdu_crc self-test {name}: {'ok' if ok else 'FAIL'} (verdict {got}, expected {want})")
            for line in lines:
                print("  " + line)
        # a segment missing from the capture: no verdict
        stream = reply + _fpdu(payload) + _fpdu(payload)
        segs = [(1000, 7, 1, request)] + [(7, 1000, 1 + i, stream[i:i + 1000]) for i in (0, 2000)]
        _pcap(path, segs)
        try:
            analyse(path, src=7)
            print("fpdu_crc self-test gap: FAIL (no error)")
            failures += 1
        except ValueError as e:
            print(f"fpdu_crc self-test gap: ok ({e})")
    return 1 if failures else 0


def side_main(argv, name, doc, analyse_side, run_self_test):
    """The command line of a check of one side of a capture: PCAP --src|--dst PORT, or
    --self-test. Prints analyse_side's lines and returns its verdict (2: no analysis)."""
    if argv[1:] == ["--self-test"]:
        return run_self_test()
    if len(argv) != 4 or argv[2] not in ("--src", "--dst"):
        print(doc.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    if not shutil.which("tshark"):
        print(f"{name}: tshark is not installed", file=sys.stderr)
        return 2
    port = int(argv[3])
    try:
        verdict, lines = analyse_side(argv[1], src=port if argv[2] == "--src" else None,
                                      dst=port if argv[2] == "--dst" else None)
    except (ValueError, subprocess.CalledProcessError) as e:
        print(f"{name}: {e}")
        return 2
    print("\n".join(lines))
    return verdict


def main(argv):
    return side_main(argv, "fpdu_crc", __doc__, analyse, self_test)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
