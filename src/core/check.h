// DI_CHECK: invariants of the program (never user input: that gets a Status). On failure prints
// file:line and the condition, then aborts.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace deepinfer::detail {
[[noreturn]] inline void check_failed(const char* file, int line, const char* cond) {
  std::fprintf(stderr, "%s:%d: check failed: %s\n", file, line, cond);
  std::abort();
}
}  // namespace deepinfer::detail

#define DI_CHECK(cond) \
  ((cond) ? (void)0 : ::deepinfer::detail::check_failed(__FILE__, __LINE__, #cond))
#define DI_CHECK_EQ(a, b) DI_CHECK((a) == (b))
#define DI_CHECK_LT(a, b) DI_CHECK((a) < (b))
#define DI_CHECK_LE(a, b) DI_CHECK((a) <= (b))
#ifdef NDEBUG
#define DI_DCHECK(cond) ((void)0)
#else
#define DI_DCHECK(cond) DI_CHECK(cond)
#endif
