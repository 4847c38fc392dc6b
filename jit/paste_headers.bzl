"""A genrule pasting headers into a C++ function returning them as one string.

Generated translation units (C++ for the host compiler, CUDA C++ for NVRTC) start with runtime
headers; pasting them at build time means the module needs no source tree at run time. Lines
including other project headers are dropped: the pasted list must already be in dependency order.
"""

def paste_headers(name, function, headers, declared_in, namespace = "dt::jit"):
    """Defines genrule `name` writing `<name>.cc` with `const char* <function>()`.

    Args:
      name: the genrule's name; its output is `<name>.cc` (name without a trailing "_cc").
      function: the function's name in `namespace`.
      headers: labels of the headers, in the order they are pasted.
      declared_in: the project header declaring `function`, included by the output.
      namespace: the C++ namespace `function` is declared in.
    """
    locations = " ".join(["$(location %s)" % h for h in headers])
    native.genrule(
        name = name,
        srcs = headers,
        outs = [name.replace("_cc", "") + ".cc"],
        cmd = ("(echo '#include \"%s\"'; " % declared_in) +
              ("echo 'namespace %s { const char* %s() { return'; " % (namespace, function)) +
              ("for f in %s; do " % locations) +
              "echo 'R\"DTPRELUDE('; grep -v '^#include \"\\(runtime\\|jit\\)/' $$f; echo ')DTPRELUDE\"'; done; " +
              "echo '; } }') > $@",
    )
