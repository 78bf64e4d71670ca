// Clang's thread-safety attributes, as macros that expand to nothing on
// other compilers (LevelDB's port/thread_annotations.h does the same). The
// clang build of `make test` (ctest `thread_safety_build`) compiles the
// product code with -Wthread-safety -Werror, so a field marked GUARDED_BY(mu)
// read without holding mu does not build.
//
// libstdc++'s std::mutex carries no capability attribute, so guarded state
// is guarded by a walwatch::Mutex (cdc/base/mutex.h), which does.
#ifndef WALWATCH_CDC_BASE_THREAD_ANNOTATIONS_H_
#define WALWATCH_CDC_BASE_THREAD_ANNOTATIONS_H_

#if defined(__clang__)
#define WALWATCH_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define WALWATCH_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) WALWATCH_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY WALWATCH_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) WALWATCH_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) WALWATCH_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRE(...) WALWATCH_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) WALWATCH_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define REQUIRES(...) WALWATCH_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) WALWATCH_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) WALWATCH_THREAD_ANNOTATION(assert_capability(x))
#define RETURN_CAPABILITY(x) WALWATCH_THREAD_ANNOTATION(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS \
  WALWATCH_THREAD_ANNOTATION(no_thread_safety_analysis)

#endif  // WALWATCH_CDC_BASE_THREAD_ANNOTATIONS_H_
