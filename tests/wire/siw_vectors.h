// Byte-exact frames sent by Linux 6.1 siw, taken from the captures in the siw-vm interop harness.
//
// Each array is one TCP payload of the named capture (siw-flavour-<flavour>.pcap, frame number as
// tshark numbers it), pasted here field by field so that the tests never read a pcap at run time.
// The FPDU payloads are what rping sends: a struct rping_rdma_info { u64 buf; u32 rkey; u32 size; }
// in network byte order, and the 64-byte ping string "rdma-ping-0: ABC...qr\0".
#pragma once

#include <cstdint>

namespace uwarp::wire::siw {

// ---------------------------------------------------------------------------------------------
// MPA connection setup frames (RFC 5044 section 7.1, RFC 6581 section 3)
// ---------------------------------------------------------------------------------------------

// siw-flavour-crc-p2p frame 4: the initiator's request, CRC on, peer-to-peer with WRITE/READ RTR.
inline constexpr std::uint8_t kMpaRequestCrcP2p[] = {
    'M',  'P',  'A', ' ', 'I', 'D', ' ', 'R', 'e', 'q', ' ', 'F', 'r', 'a', 'm', 'e',  // key
    0x50, 0x02,  // M=0 C=1 R=0 S=1, reserved 0, revision 2
    0x00, 0x04,  // PD_Length 4
    0x80, 0x01,  // IRD word: A (peer-to-peer), IRD 1
    0xc0, 0x01,  // ORD word: C (zero-length WRITE RTR), D (zero-length READ RTR), ORD 1
};

// siw-flavour-crc-p2p frame 6: the responder's reply, echoing C and choosing WRITE as RTR.
inline constexpr std::uint8_t kMpaReplyCrcP2p[] = {
    'M',  'P',  'A', ' ', 'I', 'D', ' ', 'R', 'e', 'p', ' ', 'F', 'r', 'a', 'm', 'e',  // key
    0x50, 0x02,  // M=0 C=1 R=0 S=1, reserved 0, revision 2
    0x00, 0x04,  // PD_Length 4
    0x80, 0x01,  // IRD word: A (peer-to-peer), IRD 1
    0x80, 0x01,  // ORD word: C (zero-length WRITE RTR), ORD 1
};

// siw-flavour-default frame 4: siw's default request, no CRC, no peer-to-peer, still S + rev 2.
inline constexpr std::uint8_t kMpaRequestDefault[] = {
    'M',  'P',  'A', ' ', 'I', 'D', ' ', 'R', 'e', 'q', ' ', 'F', 'r', 'a', 'm', 'e',  // key
    0x10, 0x02,  // M=0 C=0 R=0 S=1, reserved 0, revision 2
    0x00, 0x04,  // PD_Length 4
    0x00, 0x01,  // IRD word: IRD 1
    0x00, 0x01,  // ORD word: ORD 1
};

// siw-flavour-default frame 6 (also siw-flavour-crc-refused frame 6, where the request had C=1
// and siw as responder declined CRC by answering C=0).
inline constexpr std::uint8_t kMpaReplyDefault[] = {
    'M',  'P',  'A', ' ', 'I', 'D', ' ', 'R', 'e', 'p', ' ', 'F', 'r', 'a', 'm', 'e',  // key
    0x10, 0x02,  // M=0 C=0 R=0 S=1, reserved 0, revision 2
    0x00, 0x04,  // PD_Length 4
    0x00, 0x01,  // IRD word: IRD 1
    0x00, 0x01,  // ORD word: ORD 1
};

// siw-flavour-p2p-read frame 4: peer-to-peer, offering only a zero-length READ as RTR.
inline constexpr std::uint8_t kMpaRequestP2pRead[] = {
    'M',  'P',  'A', ' ', 'I', 'D', ' ', 'R', 'e', 'q', ' ', 'F', 'r', 'a', 'm', 'e',  // key
    0x10, 0x02,  // M=0 C=0 R=0 S=1, reserved 0, revision 2
    0x00, 0x04,  // PD_Length 4
    0x80, 0x01,  // IRD word: A (peer-to-peer), IRD 1
    0x40, 0x01,  // ORD word: D (zero-length READ RTR), ORD 1
};

// siw-flavour-p2p-no-rtr frame 6: peer-to-peer reply that picks no RTR type (the initiator then
// sends kTerminateNoRtr below).
inline constexpr std::uint8_t kMpaReplyP2pNoRtr[] = {
    'M',  'P',  'A', ' ', 'I', 'D', ' ', 'R', 'e', 'p', ' ', 'F', 'r', 'a', 'm', 'e',  // key
    0x10, 0x02,  // M=0 C=0 R=0 S=1, reserved 0, revision 2
    0x00, 0x04,  // PD_Length 4
    0x80, 0x01,  // IRD word: A (peer-to-peer), IRD 1
    0x00, 0x01,  // ORD word: no RTR bit, ORD 1
};

// siw-flavour-mpa1 frame 4: a revision-1 request, no flags, no private data.
inline constexpr std::uint8_t kMpaRequestRev1[] = {
    'M',  'P',  'A', ' ', 'I', 'D', ' ', 'R', 'e', 'q', ' ', 'F', 'r', 'a', 'm', 'e',  // key
    0x00, 0x01,  // M=0 C=0 R=0 S=0, reserved 0, revision 1
    0x00, 0x00,  // PD_Length 0
};

// siw-flavour-mpa1 frame 6: siw as responder echoes revision 1.
inline constexpr std::uint8_t kMpaReplyRev1[] = {
    'M',  'P',  'A', ' ', 'I', 'D', ' ', 'R', 'e', 'p', ' ', 'F', 'r', 'a', 'm', 'e',  // key
    0x00, 0x01,  // M=0 C=0 R=0 S=0, reserved 0, revision 1
    0x00, 0x00,  // PD_Length 0
};

// ---------------------------------------------------------------------------------------------
// FPDUs (RFC 5044 section 4) carrying DDP segments (RFC 5041) and RDMAP messages (RFC 5040)
// ---------------------------------------------------------------------------------------------

// siw-flavour-crc-p2p frame 8: the zero-length RDMA Write that siw sends as RTR (STag 1, TO 0).
inline constexpr std::uint8_t kFpduRtrWriteCrc[] = {
    0x00, 0x0e,                                      // ULPDU_Length 14 (tagged header only)
    0xc1,                                            // DDP: T=1 L=1, reserved 0, DV 1
    0x40,                                            // RDMAP: RV 1, reserved 0, opcode 0 (Write)
    0x00, 0x00, 0x00, 0x01,                          // STag 1
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // TO 0
    // no pad: 2 + 14 is a multiple of 4
    0xeb, 0xd3, 0x4c, 0x5f,  // CRC32c 0x5f4cd3eb, little-endian bytes
};

// siw-flavour-crc-p2p frame 9: a Send carrying rping's 16-byte buffer advertisement.
inline constexpr std::uint8_t kFpduSendCrc[] = {
    0x00, 0x22,                                      // ULPDU_Length 34 (18 header + 16 payload)
    0x41,                                            // DDP: T=0 L=1, reserved 0, DV 1
    0x43,                                            // RDMAP: RV 1, reserved 0, opcode 3 (Send)
    0x00, 0x00, 0x00, 0x00,                          // reserved for ULP (STag to invalidate)
    0x00, 0x00, 0x00, 0x00,                          // QN 0 (Send queue)
    0x00, 0x00, 0x00, 0x01,                          // MSN 1
    0x00, 0x00, 0x00, 0x00,                          // MO 0
    0x00, 0x00, 0x56, 0x3c, 0x6a, 0xfc, 0x83, 0x70,  // payload: rping buf
    0xff, 0x10, 0x12, 0x00,                          // payload: rping rkey
    0x00, 0x00, 0x00, 0x40,                          // payload: rping size 64
    // no pad: 2 + 34 is a multiple of 4
    0x18, 0x11, 0x7a, 0x32,  // CRC32c 0x327a1118
};

// siw-flavour-crc-p2p frame 11: an RDMA Read Request for rping's 64 bytes.
inline constexpr std::uint8_t kFpduReadRequestCrc[] = {
    0x00, 0x2e,                                      // ULPDU_Length 46 (18 header + 28 body)
    0x41,                                            // DDP: T=0 L=1, reserved 0, DV 1
    0x41,                                            // RDMAP: RV 1, opcode 1 (Read Request)
    0x00, 0x00, 0x00, 0x00,                          // reserved for ULP
    0x00, 0x00, 0x00, 0x01,                          // QN 1 (Read Request queue)
    0x00, 0x00, 0x00, 0x01,                          // MSN 1
    0x00, 0x00, 0x00, 0x00,                          // MO 0
    0xf2, 0xf7, 0x89, 0x00,                          // Data Sink STag
    0x00, 0x00, 0x55, 0xd8, 0xb3, 0x3e, 0xa5, 0x50,  // Data Sink TO
    0x00, 0x00, 0x00, 0x40,                          // RDMA Read Message Size 64
    0xff, 0x10, 0x12, 0x00,                          // Data Source STag
    0x00, 0x00, 0x56, 0x3c, 0x6a, 0xfc, 0x83, 0x70,  // Data Source TO
    // no pad: 2 + 46 is a multiple of 4
    0x01, 0x64, 0x0b, 0x11,  // CRC32c 0x110b6401
};

// siw-flavour-crc-p2p frame 12: the Read Response to kFpduReadRequestCrc.
inline constexpr std::uint8_t kFpduReadResponseCrc[] = {
    0x00, 0x4e,                                      // ULPDU_Length 78 (14 header + 64 payload)
    0xc1,                                            // DDP: T=1 L=1, reserved 0, DV 1
    0x42,                                            // RDMAP: RV 1, opcode 2 (Read Response)
    0xf2, 0xf7, 0x89, 0x00,                          // STag (the Read Request's Data Sink STag)
    0x00, 0x00, 0x55, 0xd8, 0xb3, 0x3e, 0xa5, 0x50,  // TO (the Data Sink TO)
    0x72, 0x64, 0x6d, 0x61, 0x2d, 0x70, 0x69, 0x6e,  // payload: "rdma-pin"
    0x67, 0x2d, 0x30, 0x3a, 0x20, 0x41, 0x42, 0x43,  // payload: "g-0: ABC"
    0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4a, 0x4b,  // payload: "DEFGHIJK"
    0x4c, 0x4d, 0x4e, 0x4f, 0x50, 0x51, 0x52, 0x53,  // payload: "LMNOPQRS"
    0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x5b,  // payload: "TUVWXYZ["
    0x5c, 0x5d, 0x5e, 0x5f, 0x60, 0x61, 0x62, 0x63,  // payload: "\]^_`abc"
    0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x6b,  // payload: "defghijk"
    0x6c, 0x6d, 0x6e, 0x6f, 0x70, 0x71, 0x72, 0x00,  // payload: "lmnopqr\0"
    // no pad: 2 + 78 is a multiple of 4
    0x73, 0xda, 0x4d, 0x8f,  // CRC32c 0x8f4dda73
};

// siw-flavour-crc-p2p frame 15: an RDMA Write of the same 64 bytes.
inline constexpr std::uint8_t kFpduWriteCrc[] = {
    0x00, 0x4e,                                      // ULPDU_Length 78 (14 header + 64 payload)
    0xc1,                                            // DDP: T=1 L=1, reserved 0, DV 1
    0x40,                                            // RDMAP: RV 1, opcode 0 (Write)
    0x8b, 0xcc, 0x15, 0x00,                          // STag
    0x00, 0x00, 0x56, 0x3c, 0x6a, 0xfc, 0x85, 0x50,  // TO
    0x72, 0x64, 0x6d, 0x61, 0x2d, 0x70, 0x69, 0x6e,  // payload: "rdma-pin"
    0x67, 0x2d, 0x30, 0x3a, 0x20, 0x41, 0x42, 0x43,  // payload: "g-0: ABC"
    0x44, 0x45, 0x46, 0x47, 0x48, 0x49, 0x4a, 0x4b,  // payload: "DEFGHIJK"
    0x4c, 0x4d, 0x4e, 0x4f, 0x50, 0x51, 0x52, 0x53,  // payload: "LMNOPQRS"
    0x54, 0x55, 0x56, 0x57, 0x58, 0x59, 0x5a, 0x5b,  // payload: "TUVWXYZ["
    0x5c, 0x5d, 0x5e, 0x5f, 0x60, 0x61, 0x62, 0x63,  // payload: "\]^_`abc"
    0x64, 0x65, 0x66, 0x67, 0x68, 0x69, 0x6a, 0x6b,  // payload: "defghijk"
    0x6c, 0x6d, 0x6e, 0x6f, 0x70, 0x71, 0x72, 0x00,  // payload: "lmnopqr\0"
    // no pad: 2 + 78 is a multiple of 4
    0x08, 0x97, 0x74, 0x9e,  // CRC32c 0x9e749708
};

// siw-flavour-mpa1 frame 8: a Send without CRC (the trailer is present and zero).
inline constexpr std::uint8_t kFpduSendNoCrc[] = {
    0x00, 0x22,                                      // ULPDU_Length 34 (18 header + 16 payload)
    0x41,                                            // DDP: T=0 L=1, reserved 0, DV 1
    0x43,                                            // RDMAP: RV 1, opcode 3 (Send)
    0x00, 0x00, 0x00, 0x00,                          // reserved for ULP
    0x00, 0x00, 0x00, 0x00,                          // QN 0
    0x00, 0x00, 0x00, 0x01,                          // MSN 1
    0x00, 0x00, 0x00, 0x00,                          // MO 0
    0x00, 0x00, 0x56, 0x46, 0x7d, 0xbd, 0xe3, 0x70,  // payload: rping buf
    0x5e, 0x14, 0xba, 0x00,                          // payload: rping rkey
    0x00, 0x00, 0x00, 0x40,                          // payload: rping size 64
    0x00, 0x00, 0x00, 0x00,                          // CRC: not negotiated, zero
};

// siw-flavour-p2p-read frame 8: the zero-length RDMA Read Request that a READ RTR is.
inline constexpr std::uint8_t kFpduRtrReadRequest[] = {
    0x00, 0x2e,                                      // ULPDU_Length 46 (18 header + 28 body)
    0x41,                                            // DDP: T=0 L=1, reserved 0, DV 1
    0x41,                                            // RDMAP: RV 1, opcode 1 (Read Request)
    0x00, 0x00, 0x00, 0x00,                          // reserved for ULP
    0x00, 0x00, 0x00, 0x01,                          // QN 1
    0x00, 0x00, 0x00, 0x01,                          // MSN 1
    0x00, 0x00, 0x00, 0x00,                          // MO 0
    0x00, 0x00, 0x00, 0x00,                          // Data Sink STag 0
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // Data Sink TO 0
    0x00, 0x00, 0x00, 0x00,                          // RDMA Read Message Size 0
    0x00, 0x00, 0x00, 0x01,                          // Data Source STag 1
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // Data Source TO 0
    0x00, 0x00, 0x00, 0x00,                          // CRC: not negotiated, zero
};

// siw-flavour-p2p-read frame 9: the zero-length Read Response that answers the READ RTR.
inline constexpr std::uint8_t kFpduRtrReadResponse[] = {
    0x00, 0x0e,                                      // ULPDU_Length 14
    0xc1,                                            // DDP: T=1 L=1, reserved 0, DV 1
    0x42,                                            // RDMAP: RV 1, opcode 2 (Read Response)
    0x00, 0x00, 0x00, 0x00,                          // STag 0 (the request's Data Sink STag)
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // TO 0
    0x00, 0x00, 0x00, 0x00,                          // CRC: not negotiated, zero
};

// siw-flavour-p2p-no-rtr frame 8: the initiator's Terminate after kMpaReplyP2pNoRtr. siw writes
// the control word with little-endian bitfields: it means Layer 2 (LLP), EType 0, ECode 0x07 (no
// matching RTR), but the first byte 0x02 reads as Layer 0, EType 2 in the RFC 5040 layout.
inline constexpr std::uint8_t kFpduTerminateNoRtr[] = {
    0x00, 0x16,              // ULPDU_Length 22 (18 header + 4 body)
    0x41,                    // DDP: T=0 L=1, reserved 0, DV 1
    0x47,                    // RDMAP: RV 1, opcode 7 (Terminate)
    0x00, 0x00, 0x00, 0x00,  // reserved for ULP
    0x00, 0x00, 0x00, 0x02,  // QN 2 (Terminate queue)
    0x00, 0x00, 0x00, 0x01,  // MSN 1
    0x00, 0x00, 0x00, 0x00,  // MO 0
    0x02,                    // Terminate: siw's EType 0 << 4 | Layer 2 (RFC: Layer 0, EType 2)
    0x07,                    // Terminate: Error Code 0x07
    0x00, 0x00,              // Terminate: Hdrct M=0 D=0 R=0, reserved 0
    // no pad: 2 + 22 is a multiple of 4
    0x00, 0x00, 0x00, 0x00,  // CRC: not negotiated, zero
};

}  // namespace uwarp::wire::siw
