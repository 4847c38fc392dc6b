#include "runtime/autograd_meta.h"

namespace dt {
namespace {
thread_local bool grad_enabled = true;
}  // namespace

bool GradEnabled() { return grad_enabled; }
void SetGradEnabled(bool enabled) { grad_enabled = enabled; }

}  // namespace dt
