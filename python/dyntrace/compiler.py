"""dyntrace.compiler: torch.compile's spelling of dyntrace.jit, so code written for PyTorch 2 runs
unchanged: `model = dyntrace.compile(model)`, `@dyntrace.compile(fullgraph=True)`,
`dyntrace.compiler.reset()`.

Modes map onto CUDA graphs: "reduce-overhead" and "max-autotune" capture them always
(cuda_graphs=True), "max-autotune-no-cudagraphs" never, "default" as dyntrace decides ("auto": a
graph whose every step runs on the device replays from its second call). Backends: PyTorch's
"inductor" (its default) and "cudagraphs" are dyntrace's compiling backend for the inputs'
device ("auto"), "eager" and "aot_eager" trace and run the graph op by op ("eager"); dyntrace's
own names ("cpu", "cuda", "auto", "eager") work as in dyntrace.jit."""
import dyntrace as _dt

_MODES = {None: "auto", "default": "auto", "reduce-overhead": True, "max-autotune": True,
          "max-autotune-no-cudagraphs": False}
_BACKENDS = {"inductor": "auto", "cudagraphs": "auto", "eager": "eager", "aot_eager": "eager", "auto": "auto",
             "cpu": "cpu", "cuda": "cuda"}


def compile(model=None, *, fullgraph=False, dynamic=None, backend="inductor", mode=None, options=None,
            disable=False):
    """dyntrace.jit under torch.compile's arguments (see the module's doc); without `model`, a
    decorator. `options` (Inductor's settings) has no dyntrace counterpart and is refused;
    disable=True gives `model` back unchanged."""
    if mode not in _MODES:
        raise RuntimeError(f"Unrecognized mode={mode!r}, should be one of: {', '.join(m for m in _MODES if m)}")
    if not isinstance(backend, str) or backend not in _BACKENDS:
        raise ValueError(f"dyntrace.compile(): backend={backend!r} is not one of {', '.join(_BACKENDS)} "
                         "(custom backend callables are PyTorch's, not dyntrace's)")
    if options:
        raise ValueError("dyntrace.compile(): options= sets Inductor's configuration, which dyntrace does not have; "
                         "use mode= or dyntrace.jit's own arguments")
    if model is None:
        return lambda fn: compile(fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
                                  options=options, disable=disable)
    if disable:
        return model
    return _dt.jit(model, backend=_BACKENDS[backend], fullgraph=fullgraph, dynamic=dynamic,
                   cuda_graphs=_MODES[mode])


def reset():
    """Forgets everything compiled (torch.compiler.reset): dyntrace.reset()."""
    _dt.reset()


_dt.compile = compile
