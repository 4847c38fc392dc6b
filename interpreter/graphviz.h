// interpreter/graphviz.h: turning DOT text into SVG with Graphviz's `dot` command.
//
// dyntrace does not link Graphviz; it runs `dot -Tsvg` (found on PATH) as a subprocess, so the
// picture is only needed, and Graphviz only required, when someone asks for one:
//   absl::StatusOr<std::string> svg = dt::graphviz::DotToSvg(graph.ToDot("f"));
#ifndef DYNTRACE_INTERPRETER_GRAPHVIZ_H_
#define DYNTRACE_INTERPRETER_GRAPHVIZ_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dt::interpreter::graphviz {

// The SVG document `dot -Tsvg` makes of `dot_text`. FailedPrecondition when `dot` is not on PATH
// (the message says how to install it); Internal when dot fails (with its stderr).
[[nodiscard]] absl::StatusOr<std::string> DotToSvg(absl::string_view dot_text);

// `svg` without what precedes its <svg> element (XML declaration, DOCTYPE, comments), ready to
// be placed inside an HTML document.
std::string InlineSvg(absl::string_view svg);

}  // namespace dt::interpreter::graphviz

#endif  // DYNTRACE_INTERPRETER_GRAPHVIZ_H_
