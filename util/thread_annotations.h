// Clang's thread-safety annotations, as macros: which mutex guards a member
// (GUARDED_BY), what a function needs held (REQUIRES) or not held (EXCLUDES),
// and which types are lockable (CAPABILITY) or scoped lock holders
// (SCOPED_CAPABILITY). Clang's -Wthread-safety checks them at compile time
// (DEVELOPERS.md: STOKER_THREAD_SAFETY); under other compilers they are empty.
//
// The attribute names are those of clang's documentation, "Thread Safety
// Analysis" (clang.llvm.org/docs/ThreadSafetyAnalysis.html), whose
// mutex.h these macros follow, as LevelDB's port/thread_annotations.h does.
//
// Thread-safety: compile-time only.
#pragma once

#if defined(__clang__)
#define STOKER_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define STOKER_THREAD_ANNOTATION(x)
#endif

// A type that is a lock: stoker::Mutex (util/mutex.h), TimedMutex.
#define CAPABILITY(x) STOKER_THREAD_ANNOTATION(capability(x))
// An RAII type that holds a capability for its lifetime: MutexLock.
#define SCOPED_CAPABILITY STOKER_THREAD_ANNOTATION(scoped_lockable)

// A member read or written only with the named mutex held.
#define GUARDED_BY(x) STOKER_THREAD_ANNOTATION(guarded_by(x))
// A pointer member whose pointee is read or written only with the named mutex held.
#define PT_GUARDED_BY(x) STOKER_THREAD_ANNOTATION(pt_guarded_by(x))

// Lock ordering: this mutex is taken after (before) the named ones.
#define ACQUIRED_AFTER(...) STOKER_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define ACQUIRED_BEFORE(...) STOKER_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))

// A function called only with the mutexes held (and returning with them held).
#define REQUIRES(...) STOKER_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
// A function called only with the mutexes not held (it takes them itself).
#define EXCLUDES(...) STOKER_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))

// A function that takes (releases) the mutexes, or the object's own capability.
#define ACQUIRE(...) STOKER_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) STOKER_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
// A function that takes the mutexes when it returns the given value.
#define TRY_ACQUIRE(...) STOKER_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// A function that checks at run time that the mutex is held; the analysis then assumes it.
#define ASSERT_CAPABILITY(x) STOKER_THREAD_ANNOTATION(assert_capability(x))
// A function that returns a reference to the named mutex.
#define RETURN_CAPABILITY(x) STOKER_THREAD_ANNOTATION(lock_returned(x))

// Turns the analysis off for one function whose locking it cannot follow;
// each use says why.
#define NO_THREAD_SAFETY_ANALYSIS STOKER_THREAD_ANNOTATION(no_thread_safety_analysis)
