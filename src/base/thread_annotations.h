// Clang's thread-safety attributes (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html), so
// that "which lock guards this" is checked at compile time: the clang build with
// -Wthread-safety -Werror (scripts/build tsa) fails on an access without its lock. Other
// compilers see nothing.
#pragma once

#if defined(__clang__)
#define UWARP_TSA(x) __attribute__((x))
#else
#define UWARP_TSA(x)
#endif

#define CAPABILITY(x) UWARP_TSA(capability(x))
#define SCOPED_CAPABILITY UWARP_TSA(scoped_lockable)
#define GUARDED_BY(x) UWARP_TSA(guarded_by(x))
#define PT_GUARDED_BY(x) UWARP_TSA(pt_guarded_by(x))
#define REQUIRES(...) UWARP_TSA(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) UWARP_TSA(requires_shared_capability(__VA_ARGS__))
#define ACQUIRE(...) UWARP_TSA(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) UWARP_TSA(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) UWARP_TSA(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) UWARP_TSA(release_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) UWARP_TSA(release_generic_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) UWARP_TSA(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) UWARP_TSA(locks_excluded(__VA_ARGS__))
#define RETURN_CAPABILITY(x) UWARP_TSA(lock_returned(x))
#define ASSERT_CAPABILITY(x) UWARP_TSA(assert_capability(x))
#define NO_THREAD_SAFETY_ANALYSIS UWARP_TSA(no_thread_safety_analysis)
