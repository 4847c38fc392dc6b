#ifndef DYNTRACE_INTERPRETER_STACK_NAMES_H_
#define DYNTRACE_INTERPRETER_STACK_NAMES_H_

#include <string>
#include <vector>

#include "interpreter/bytecode.h"

namespace dt::interpreter {

// Names, in the user's words, for the value-stack slots at `offset` of a segment that starts
// mid-function (`iter(xs)` for a for loop's iterator, `next(iter(xs))` for the item it just
// produced), so guards and recompile reasons never read `S[0]`. Found by following the code from
// its start with each row's stack effect; each slot is named after the instruction that pushed
// it. Names are unique (a guard set keys guards by their text). Empty when the walk does not
// reach `offset` with `depth` values (a slot is then named by its index).
std::vector<std::string> StackNamesAt(const DecodedCode& code, int offset, int depth);

}  // namespace dt::interpreter

#endif  // DYNTRACE_INTERPRETER_STACK_NAMES_H_
