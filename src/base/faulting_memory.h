// Access to memory the application may have unmapped, or never mapped: regions registered for
// on-demand paging (access::kOnDemand). Hardware with on-demand paging faults such pages in as
// it reaches them and reports an access it cannot complete as an error; these functions do the
// same for the CPU: the kernel performs the access and reports a fault (false) instead of
// raising SIGSEGV in the process.
//
//  - copy_to_faulting: process_vm_writev on this very process, one system call per copy. Pages
//    that are mapped but not yet present are faulted in as by any write.
//  - prefault: madvise(MADV_POPULATE_WRITE or _READ) over the pages of `memory` (Linux 5.14),
//    for accesses that cannot go through the kernel (atomics, sends handed to TCP later): they
//    then find their pages present, unless the application unmaps them in between.
//
// Thread: any; they touch no state of their own.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/bytes.h"

namespace uwarp {

// Copies src into `dst`, which may fault; false if any byte of `dst` could not be written.
bool copy_to_faulting(ByteSpan dst, ConstByteSpan src);

enum class Prefault : std::uint8_t { kRead, kWrite };
// Brings the pages of `memory` in for reading or writing; false if one cannot be (not mapped,
// or mapped without that right).
bool prefault(ConstByteSpan memory, Prefault how);

}  // namespace uwarp
