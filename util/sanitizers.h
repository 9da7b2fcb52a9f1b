// Which sanitizer a build runs under, for the few places whose behaviour
// must differ there (a sanitizer's runtime may keep threads of its own).
#pragma once

namespace stoker {

#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif
#else
inline constexpr bool kThreadSanitizer = false;
#endif

}  // namespace stoker
