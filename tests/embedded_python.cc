#include "tests/embedded_python.h"

#include "interpreter/py_module.h"

namespace dt::testing {

std::string StartEmbeddedPython() {
  if (PyImport_AppendInittab("dyntrace", PyInit_dyntrace) < 0) return "could not register dyntrace";
  return StartPython();
}

}  // namespace dt::testing
