// guards/source.h: where a value a trace depended on lives, as a path from the frame.
//
// Sources print as the expressions people read in guard listings (`L['x']`, `G['w'].bias`,
// `L['xs'][1]`, `C['scale']`) and resolve against a live frame without calling Python code:
// locals and closure cells are read from the frame, globals and attributes from dicts.
#ifndef DYNTRACE_GUARDS_SOURCE_H_
#define DYNTRACE_GUARDS_SOURCE_H_

#include <Python.h>

#include <memory>
#include <string>

namespace dt::guards {

// The frame values a guard set reads. All borrowed; valid while the frame runs.
// The two CPython internals attribute sources need (a lookup on a type's MRO without running
// descriptors, and an object's instance dict) live behind interpreter/'s CPython boundary, which
// installs them once at module start-up; guards/ itself touches no CPython internals.
struct ObjectAccess {
  PyObject* (*lookup_on_type)(PyTypeObject* type, PyObject* name);  // borrowed or null
  PyObject* (*instance_dict)(PyObject* obj);                         // borrowed or null
  // A tensor's .grad (None when unset), borrowed; null when `obj` is not a tensor.
  PyObject* (*tensor_grad)(PyObject* obj);
};
void SetObjectAccess(ObjectAccess access);

struct FrameInputs {
  PyObject* const* locals = nullptr;  // the frame's fast locals (arguments at entry)
  int num_locals = 0;
  PyObject* globals = nullptr;   // dict
  PyObject* builtins = nullptr;  // dict
  PyObject* closure = nullptr;   // tuple of cells, or null
  // Segments that start mid-function also read the value stack they start with.
  PyObject* const* stack = nullptr;
  int stack_size = 0;
  // Nonzero while a guard set checks the frame (GuardSet::Check): sources resolved under one
  // epoch keep their value for it (Source::memo_*), so the path a hundred guards share
  // (L['opt'].param_groups[0]['params']) is walked once. No Python code runs within an epoch.
  uint64_t resolve_epoch = 0;
};

// A resolve epoch no frame has used yet (the GIL serialises callers).
uint64_t NewResolveEpoch();

struct Source {
  enum class Kind : uint8_t {
    kLocal,         // frame local `index` called `name`
    kGlobal,        // root frame's globals[name]
    kBuiltin,       // builtins[name]
    kClosure,       // contents of the root function's closure cell `index` (named `name`)
    kAttr,          // parent.name, read from the parent's __dict__ (instances, modules, classes)
    kItem,          // parent[index] of a tuple or list
    kDictItem,      // parent[name] of a dict with str keys
    kFuncGlobals,   // parent.__globals__ of a function
    kFuncDefaults,  // parent.__defaults__ of a function (a tuple, or None)
    kFuncKwDefaults,  // parent.__kwdefaults__ of a function (a dict, or None)
    kFuncCell,      // contents of parent's closure cell `index`
    kStack,         // value-stack slot `index` of a segment that starts mid-function (`name`: how
                    // the user's code made it, e.g. `iter(xs)`; empty: printed as S[index])
    kCellContents,  // contents of the cell object at parent
    kFreeCell,      // the root function's closure cell `index` itself (named `name`)
    kIterItem,      // remaining item `index` of a resume iterator at parent
    kMethodFunc,    // parent.__func__ of a bound method (a with block's __exit__ on the stack)
    kMethodSelf,    // parent.__self__ of a bound method
    kTypeOf,        // type(parent): its attributes are found on the MRO (class constants)
    kGlobalsDict,   // the root frame's globals dict itself (where `global` stores land)
    kSysModule,     // sys.modules[name] (a module an `import` inside the function reads)
    kPartialPart,   // of a functools.partial at parent: .func ("func"), .args ("args") or .keywords
    kModuleDict,    // parent.__dict__ of a module (the globals of the functions defined in it)
    kDictItemByKey,  // parent[key] of a dict whose key is the object at source `key` (an
                     // optimizer's state, keyed by parameter: tensors hash by identity)
  };
  Kind kind;
  int index = -1;
  std::string name;
  std::shared_ptr<const Source> parent;
  std::shared_ptr<const Source> key;  // kDictItemByKey
  // `name` as an interned str, made on the first lookup by it (a guard set resolves its sources
  // on every call: a str made per lookup cost an allocation and a hash each time). Its reference
  // is never released: interned strs outlive the process's sources (destroyed after CPython
  // finalises, when a release would crash), and there is one per distinct name.
  mutable PyObject* name_str = nullptr;
  // The value resolved under FrameInputs::resolve_epoch `memo_epoch` (borrowed).
  mutable uint64_t memo_epoch = 0;
  mutable PyObject* memo_value = nullptr;

  std::string ToString() const;
  // The value, borrowed, or null when it no longer exists (no Python error is left set).
  PyObject* Resolve(const FrameInputs& frame) const;

 private:
  PyObject* ResolveUncached(const FrameInputs& frame) const;
};
using SourceRef = std::shared_ptr<const Source>;

SourceRef LocalSource(int index, std::string name);
SourceRef GlobalSource(std::string name);
SourceRef BuiltinSource(std::string name);
SourceRef ClosureSource(int index, std::string name);
SourceRef AttrSource(SourceRef parent, std::string name);
SourceRef ItemSource(SourceRef parent, int index);
SourceRef DictItemSource(SourceRef parent, std::string key);
SourceRef DictItemByKeySource(SourceRef dict, SourceRef key);
SourceRef FuncGlobalsSource(SourceRef function);
SourceRef FuncDefaultsSource(SourceRef function);
SourceRef FuncKwDefaultsSource(SourceRef function);
SourceRef FuncCellSource(SourceRef function, int index, std::string name);
SourceRef StackSource(int index, std::string name = "");
SourceRef CellContentsSource(SourceRef cell);
SourceRef FreeCellSource(int index, std::string name);
SourceRef IterItemSource(SourceRef iterator, int index);
SourceRef MethodFuncSource(SourceRef method);
SourceRef MethodSelfSource(SourceRef method);
SourceRef TypeOfSource(SourceRef object);
SourceRef GlobalsDictSource();
SourceRef SysModuleSource(std::string name);
// The dict of the module at `module`. Not an AttrSource: a module's __dict__ is a member of the
// module object, never a key of that dict, so kAttr (which reads the dict) would find nothing.
SourceRef ModuleDictSource(SourceRef module);
SourceRef PartialPartSource(SourceRef partial, std::string part);  // "func", "args" or "keywords"

// The iterators dyntrace makes when a loop's state crosses a graph break expose their remaining
// items without running Python code; the interpreter layer registers how to read them.
struct RemainingItems {
  PyObject* items = nullptr;  // borrowed: a tuple or list (the items from `start` on are left)
  Py_ssize_t start = 0;
};
using IteratorReader = bool (*)(PyObject* obj, RemainingItems* out);
void SetIteratorReader(IteratorReader reader);
bool ReadRemainingItems(PyObject* obj, RemainingItems* out);

}  // namespace dt::guards

#endif  // DYNTRACE_GUARDS_SOURCE_H_
