// Helpers for absl::Status-based control flow. Debian's abseil (20220623)
// ships no status macros, so the project keeps its two here.
#ifndef GPU_AGENT_BASE_STATUS_MACROS_H_
#define GPU_AGENT_BASE_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns from the current function if `expr` (an absl::Status) is not OK.
#define GA_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::absl::Status ga_status_ = (expr);      \
    if (!ga_status_.ok()) return ga_status_; \
  } while (0)

#define GA_CONCAT_INNER_(a, b) a##b
#define GA_CONCAT_(a, b) GA_CONCAT_INNER_(a, b)

// `GA_ASSIGN_OR_RETURN(auto x, MakeX());` assigns the value of an
// absl::StatusOr or returns its status.
#define GA_ASSIGN_OR_RETURN(lhs, expr) \
  GA_ASSIGN_OR_RETURN_IMPL_(GA_CONCAT_(ga_statusor_, __LINE__), lhs, expr)
#define GA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return std::move(tmp).status();  \
  lhs = std::move(tmp).value()

#endif  // GPU_AGENT_BASE_STATUS_MACROS_H_
