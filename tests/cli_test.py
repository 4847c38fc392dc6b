"""End-to-end tests of the dyntrace command (//cli:dyntrace) and of its HTML report.

Usage: cli_test.py path/to/dyntrace path/to/dyntrace.so examples_dir path/to/libfake_cuda.so
Each case runs the command in a subprocess on a small script (written to a temporary directory)
or on one of examples/, and checks exit codes, output, logs, the --stats table and the report.
The report test loads the HTML file in headless Chromium (Debian's chromium-headless-shell or
chromium) and fails, saying how to install it, when neither is present.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

DYNTRACE = EXAMPLES = MODULE_DIR = FAKE_CUDA = None

# A function worth compiling, a data-dependent branch (a graph break) and a dtype change (a
# recompile), in the shape people write.
TENSOR_SCRIPT = """\
import sys
import dyntrace as dt

def scale_and_shift(x, y):
    z = x * 2 + y
    if z.sum() < 0:
        z = -z
    return z.exp()

a = dt.randn(3, 4)
for _ in range(3):
    scale_and_shift(a, a)
b = a.to(dt.float64)
scale_and_shift(b, b)
print("done", dt.stats()["graphs"])
"""


def sanitizer_env(module):
    """Under --config=asan the instrumented module needs the ASan runtime preloaded into a plain
    interpreter (and CPython's own leaks unreported)."""
    try:
        out = subprocess.run(["ldd", module], capture_output=True, text=True).stdout
    except OSError:
        return {}
    for line in out.splitlines():
        if "libasan.so" in line and "=>" in line:
            return {"LD_PRELOAD": line.split("=>")[1].split()[0], "ASAN_OPTIONS": "detect_leaks=0"}
    return {}


def run(args, cwd=None, env_extra=None, timeout=300):
    env = dict(os.environ)
    env.pop("DYNTRACE_LOGS", None)
    if MODULE_DIR and args[0] in (sys.executable, DYNTRACE):
        env.update(sanitizer_env(os.path.join(MODULE_DIR, "dyntrace.so")))
    env.update(env_extra or {})
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


class CommandTestCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dyntrace-cli-", dir=os.environ.get("TEST_TMPDIR"))

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))
        return path

    def dyntrace(self, *args, **kwargs):
        return run([DYNTRACE, *args], **kwargs)

    def assertRan(self, result, code=0):
        self.assertEqual(result.returncode, code,
                         f"exit code {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}")


class CommandLineTest(CommandTestCase):
    def test_help_prints_usage_and_exits_0(self):
        result = self.dyntrace("--help")
        self.assertRan(result)
        for option in ("--backend", "--log", "--report", "--stats", "--fullgraph", "-m module"):
            self.assertIn(option, result.stdout)

    def test_bad_command_lines_exit_2_with_usage(self):
        script = self.write("ok.py", "print('should not run')\n")
        for args, message in [(["--no-such-option", script], "unknown option '--no-such-option'"),
                              ([], "no script"),
                              (["--stats"], "no script"),
                              (["-m"], "-m needs a module name"),
                              (["--log", "graph,nonsense", script], "unknown log kind 'nonsense'"),
                              (["--report"], "--report needs a value")]:
            result = self.dyntrace(*args)
            self.assertEqual(result.returncode, 2, (args, result.stderr))
            self.assertIn(message, result.stderr)
            self.assertIn("usage: dyntrace", result.stderr)
            self.assertNotIn("should not run", result.stdout)

    def test_unknown_backend_is_a_start_error(self):
        script = self.write("ok.py", "print('should not run')\n")
        result = self.dyntrace("--backend", "abacus", script)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("backend 'abacus'", result.stderr)
        self.assertNotIn("should not run", result.stdout)

    def test_script_sees_argv_main_and_its_directory_like_python(self):
        script = self.write("sub/show.py", """\
            import sys, dyntrace
            print(repr(sys.argv))
            print(__name__)
            print(sys.path[0])
            print("dyntrace" in sys.builtin_module_names)
            """)
        result = self.dyntrace("--stats", script, "a b", "--log", "-m", cwd=self.dir)
        self.assertRan(result)
        lines = result.stdout.splitlines()
        self.assertEqual(lines[0], repr([script, "a b", "--log", "-m"]))
        self.assertEqual(lines[1], "__main__")
        self.assertEqual(lines[2], os.path.dirname(script))
        self.assertEqual(lines[3], "True")

    def test_dyntrace_python_picks_a_venv(self):
        venv = os.path.join(self.dir, "venv")
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=120)
        script = self.write("where.py", """\
            import sys, dyntrace
            print(sys.prefix)
            print(sys.executable)
            print(dyntrace.jit(lambda x: x * 2 + 1)(dyntrace.ones(2)).tolist())
            """)
        python = os.path.join(venv, "bin", "python3")
        result = self.dyntrace(script, env_extra={"DYNTRACE_PYTHON": python})
        self.assertRan(result)
        prefix, executable, values = result.stdout.splitlines()
        self.assertEqual(os.path.realpath(prefix), os.path.realpath(venv))
        self.assertEqual(executable, python)
        self.assertEqual(values, "[3.0, 3.0]")

    def test_relative_script_path_is_argv0(self):
        self.write("rel.py", "import sys; print(sys.argv[0])\n")
        result = self.dyntrace("rel.py", cwd=self.dir)
        self.assertRan(result)
        self.assertEqual(result.stdout.strip(), "rel.py")

    def test_exit_codes(self):
        cases = {"sys.exit(7)": 7, "sys.exit(0)": 0, "sys.exit()": 0, "sys.exit('bye')": 1,
                 "raise KeyboardInterrupt": 130 if sys.platform != "win32" else 1, "pass": 0}
        for statement, code in cases.items():
            script = self.write("exit.py", f"import sys\n{statement}\n")
            result = self.dyntrace(script)
            if statement.startswith("raise KeyboardInterrupt"):
                # CPython 3.11+ re-raises SIGINT: the shell sees -2 from a signal or 130.
                self.assertIn(result.returncode, (130, -2), result.stderr)
                continue
            self.assertEqual(result.returncode, code, (statement, result.stderr))
        result = self.dyntrace(self.write("bye.py", "import sys\nsys.exit('bye')\n"))
        self.assertEqual(result.stderr.strip(), "bye")

    def test_missing_script_is_reported_like_python(self):
        result = self.dyntrace(os.path.join(self.dir, "nope.py"))
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("can't open file", result.stderr)

    def test_uncaught_exception_traceback_matches_python(self):
        script = self.write("crash.py", """\
            import dyntrace as dt

            def normalise(x):
                return x / x.abs().amax()

            def check(x):
                y = normalise(x)
                if y.sum() > -1000:
                    raise ValueError(f"bad batch of shape {tuple(y.shape)}")
                return y

            for _ in range(2):
                try:
                    check(dt.ones(2, 3))
                except ValueError:
                    pass
            check(dt.ones(2, 3))
            """)
        result = self.dyntrace(script)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("Traceback (most recent call last):", result.stderr)
        self.assertIn("ValueError: bad batch of shape (2, 3)", result.stderr)
        self.assertRegex(result.stderr, r'File ".*crash\.py", line 17, in <module>')
        self.assertRegex(result.stderr, r'File ".*crash\.py", line 9, in check')
        plain = run([sys.executable, script], env_extra={"PYTHONPATH": MODULE_DIR})
        self.assertEqual(plain.returncode, 1, plain.stderr)
        self.assertEqual(result.stderr, plain.stderr)

    def test_dash_m_runs_a_module_as_main(self):
        module = self.write("pkgdemo/tool.py", """\
            import sys
            import dyntrace as dt
            print(__name__, sys.argv)
            print(sys.path[0])
            x = dt.ones(3)
            sys.exit(int((x * 2).sum().item()))
            """)
        self.write("pkgdemo/__init__.py", "")
        result = self.dyntrace("-m", "pkgdemo.tool", "one", "--two", cwd=self.dir)
        self.assertEqual(result.returncode, 6, result.stderr)
        lines = result.stdout.splitlines()
        self.assertEqual(lines[0], f"__main__ {[module, 'one', '--two']!r}")
        self.assertEqual(os.path.realpath(lines[1]), os.path.realpath(self.dir))

    def test_dash_m_unknown_module(self):
        result = self.dyntrace("-m", "no_such_module_here", cwd=self.dir)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("No module named no_such_module_here", result.stderr)

    def test_stress_sets_the_environment_variable(self):
        script = self.write("env.py", "import os; print(os.environ.get('DYNTRACE_STRESS'))\n")
        self.assertEqual(self.dyntrace(script).stdout.strip(), "None")
        self.assertEqual(self.dyntrace("--stress", script).stdout.strip(), "1")

    def test_stress_reaches_the_standard_library(self):
        # The command's own enable() once turned stress mode off again, leaving the standard
        # library excluded: under 1% of frames ran through dyntrace.
        script = self.write("stdlib.py", """\
            import json, dyntrace
            def main():
                json.loads(json.dumps({"a": [1, 2]}))
            main()
            print(dyntrace._stress_mode(), dyntrace.stats()["frames_seen"] > 20)
            """)
        self.assertEqual(self.dyntrace("--stress", script).stdout.split(), ["True", "True"])

    def test_hook_is_on_for_script_frames_but_not_the_standard_library(self):
        script = self.write("plain.py", TENSOR_SCRIPT)
        result = self.dyntrace("--log", "graph", script)
        self.assertRan(result)
        graphs = int(result.stdout.split()[-1])
        self.assertGreaterEqual(graphs, 2)  # no @jit anywhere: the command turned tracing on
        self.assertIn("scale_and_shift", result.stderr)
        headers = re.findall(r"^\[dyntrace:graph\] (.*)$", result.stderr, re.M)
        stdlib = os.path.dirname(os.__file__)
        self.assertTrue(headers)
        self.assertFalse([h for h in headers if stdlib in h], headers)

    def test_fullgraph_turns_a_break_into_an_error(self):
        script = self.write("plain.py", TENSOR_SCRIPT)
        result = self.dyntrace("--fullgraph", script)
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertIn("fullgraph=True", result.stderr)
        self.assertIn("scale_and_shift", result.stderr)  # the function's break, not the module's

    def test_fullgraph_leaves_module_level_code_alone(self):
        # Module (and class) bodies are not traced: --fullgraph applies to the functions a
        # script calls, and --stats does not count the module's frame.
        script = self.write("tiny.py", "x = 1 + 2\nclass K:\n    y = x\nprint(x + K.y)\n")
        result = self.dyntrace("--fullgraph", "--stats", script)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.strip(), "6")
        self.assertRegex(result.stderr, r"frames traced\s+0\b")

    def test_stats_coverage_counts_the_scripts_own_frames(self):
        # Module bodies, import machinery and the standard library are counted on their own line,
        # not as skips: a script whose functions all run through dyntrace has coverage 1.
        script = self.write("lib_calls.py", """\
            import json
            import dyntrace as dt
            def f(x):
                return (x * 2).sum()
            for _ in range(3):
                f(dt.ones(4))
            print(json.dumps({"a": [1, 2]}))
            """)
        result = self.dyntrace("--stats", script)
        self.assertRan(result)
        self.assertRegex(result.stderr, r"frames skipped\s+0\b")
        self.assertRegex(result.stderr, r"coverage\s+1\.000")
        library = int(re.search(r"library/module-body frames\s+(\d+)", result.stderr).group(1))
        self.assertGreater(library, 0, result.stderr)

    def test_examples_run_and_check_themselves(self):
        names = ["mlp_inference", "gelu_layernorm", "attention", "data_dependent_loop", "train_mlp", "train_char_lm",
                 "train_cnn"]
        for name in names:
            result = self.dyntrace("--stats", os.path.join(EXAMPLES, name + ".py"))
            self.assertRan(result)
            self.assertIn(f"{name} OK", result.stdout)
            self.assertIn("graphs captured", result.stderr)
            captured = int(re.search(r"graphs captured\s+(\d+)", result.stderr).group(1))
            self.assertGreaterEqual(captured, 1, name)


class LogTest(CommandTestCase):
    def logs(self, kinds, script_text=TENSOR_SCRIPT, via_env=False):
        script = self.write("logs.py", script_text)
        if via_env:
            result = self.dyntrace(script, env_extra={"DYNTRACE_LOGS": kinds})
        else:
            result = self.dyntrace("--log", kinds, script)
        self.assertRan(result)
        self.assertNotIn("[dyntrace:", result.stdout)  # logs go to stderr only
        return result.stderr

    def test_graph(self):
        err = self.logs("graph")
        self.assertIn("[dyntrace:graph] scale_and_shift (", err)
        self.assertIn("def scale_and_shift(", err)
        self.assertRegex(err, r"v\d+ = dyntrace\.mul\(v\d+, other=2\)")
        self.assertIn("def scale_and_shift_at_", err)  # the segment after the branch
        self.assertNotIn("[dyntrace:guards]", err)

    def test_guards(self):
        err = self.logs("guards")
        self.assertIn("[dyntrace:guards] scale_and_shift (", err)
        self.assertRegex(err, r"L\['x'\] is a Tensor\(float32, cpu, ndim=2.*# line 5: LOAD_FAST x")
        self.assertRegex(err, r"L\['x'\] is a Tensor\(float64")
        self.assertNotIn("[dyntrace:graph]", err)

    def test_breaks(self):
        err = self.logs("breaks")
        self.assertRegex(err, r"\[dyntrace:breaks\] scale_and_shift \(.*logs\.py:4\): data-dependent branch"
                              r".*logs\.py:6 \(POP_JUMP\w* to \d+, offset \d+\)")

    def test_recompiles_name_the_guard_with_expected_and_actual(self):
        err = self.logs("recompiles")
        lines = [l for l in err.splitlines() if l.startswith("[dyntrace:recompiles]")]
        self.assertTrue(lines, err)
        self.assertRegex(lines[0], r"scale_and_shift \(.*logs\.py:4\): L\['x'\]\.dtype: expected float32, "
                                   r"actual float64; failed guard: L\['x'\] is a Tensor\(float32")

    def test_bytecode_shows_instructions_and_the_symbolic_stack(self):
        err = self.logs("bytecode")
        self.assertRegex(err, r"\[dyntrace:bytecode\] tracing scale_and_shift \(.*logs\.py:4\)")
        self.assertRegex(err, r"\[dyntrace:bytecode\] +\d+ BINARY_OP +\* +stack=\[v0:f32\[3, 4\], 2\]")
        self.assertRegex(err, r"\[dyntrace:bytecode\] tracing scale_and_shift \(.*\) from offset \d+")

    def test_kernels(self):
        probe = self.dyntrace("--backend", "cpu", self.write("probe.py", "pass\n"))
        self.assertEqual(probe.returncode, 0, probe.stderr)
        script = self.write("k.py", TENSOR_SCRIPT)
        cache = {"DYNTRACE_CACHE_DIR": os.path.join(self.dir, "kernel-cache")}
        cold = self.dyntrace("--backend", "cpu", "--log", "kernels", "--stats", script, env_extra=cache)
        self.assertRan(cold)
        self.assertNotIn("[dyntrace:kernels]", cold.stdout)
        self.assertRegex(cold.stderr, r"\[dyntrace:kernels\] .*\d+ kernel\(s\)")
        self.assertGreaterEqual(int(re.search(r"kernels compiled \(cold\) +(\d+)", cold.stderr).group(1)), 1)
        # a second process finds them in the disk cache
        warm = self.dyntrace("--backend", "cpu", "--log", "kernels", "--stats", script, env_extra=cache)
        self.assertRan(warm)
        self.assertEqual(int(re.search(r"kernels compiled \(cold\) +(\d+)", warm.stderr).group(1)), 0)
        self.assertGreaterEqual(int(re.search(r"kernels cached +(\d+)", warm.stderr).group(1)), 1)

    def test_several_kinds_and_all(self):
        err = self.logs("graph,recompiles")
        self.assertIn("[dyntrace:graph]", err)
        self.assertIn("[dyntrace:recompiles]", err)
        self.assertNotIn("[dyntrace:bytecode]", err)
        err = self.logs("all")
        for kind in ("graph", "guards", "breaks", "recompiles", "bytecode"):
            self.assertIn(f"[dyntrace:{kind}]", err)

    def test_environment_variable_does_what_log_does(self):
        err = self.logs("recompiles,graph", via_env=True)
        self.assertIn("[dyntrace:recompiles]", err)
        self.assertIn("[dyntrace:graph]", err)
        # and in any Python process that imports the module, not only under the command
        script = self.write("jitted.py", "import dyntrace as dt\n" + TENSOR_SCRIPT.replace(
            "def scale_and_shift", "@dt.jit\ndef scale_and_shift"))
        plain = run([sys.executable, script], env_extra={"PYTHONPATH": MODULE_DIR, "DYNTRACE_LOGS": "recompiles"})
        self.assertEqual(plain.returncode, 0, plain.stderr)
        self.assertIn("[dyntrace:recompiles] scale_and_shift", plain.stderr)
        self.assertIn("expected float32, actual float64", plain.stderr)

    def test_log_option_overrides_the_environment(self):
        script = self.write("logs.py", TENSOR_SCRIPT)
        result = self.dyntrace("--log", "breaks", script, env_extra={"DYNTRACE_LOGS": "graph"})
        self.assertRan(result)
        self.assertIn("[dyntrace:breaks]", result.stderr)
        self.assertNotIn("[dyntrace:graph]", result.stderr)


class StatsTest(CommandTestCase):
    def test_table(self):
        script = self.write("s.py", TENSOR_SCRIPT)
        result = self.dyntrace("--stats", script)
        self.assertRan(result)
        table = result.stderr[result.stderr.index("dyntrace stats"):]
        numbers = {}
        for label in ("frames seen", "frames traced", "frames skipped", "cache hits", "cache misses",
                      "recompiles", "graph breaks", "kernels compiled (cold)", "kernels cached"):
            match = re.search(rf"^  {re.escape(label)} +(\d+)$", table, re.M)
            self.assertIsNotNone(match, f"{label!r} missing from\n{table}")
            numbers[label] = int(match.group(1))
        self.assertRegex(table, r"compile time +\d+\.\d{3} s")
        self.assertGreaterEqual(numbers["frames seen"], 4)
        self.assertGreaterEqual(numbers["frames traced"], 2)
        # The module body and the standard library are counted apart, not as skips.
        self.assertEqual(numbers["frames skipped"], 0)
        self.assertGreater(int(re.search(r"library/module-body frames +(\d+)", table).group(1)), 0)
        self.assertGreaterEqual(numbers["cache hits"], 2)
        # the dtype change recompiles the entry segment and the one after the branch
        self.assertEqual(numbers["recompiles"], 2)
        # reasons under their counter, counted: each recompile once, the branch break per trace
        self.assertRegex(table, r"recompiles +2\n +1x  scale_and_shift .*s\.py:4\): L\['x'\]\.dtype: "
                                r"expected float32, actual float64")
        self.assertRegex(table, r"\n +1x  scale_and_shift .*s\.py:4\) at offset \d+: L\['z'\]\.dtype: "
                                r"expected float32, actual float64")
        self.assertRegex(table, r"\n +2x  data-dependent branch.*s\.py:6")
        # the program's own output is untouched
        self.assertTrue(result.stdout.startswith("done "))

    def test_table_after_an_uncaught_exception(self):
        script = self.write("s.py", TENSOR_SCRIPT + "raise RuntimeError('late')\n")
        result = self.dyntrace("--stats", script)
        self.assertEqual(result.returncode, 1)
        self.assertLess(result.stderr.index("RuntimeError: late"), result.stderr.index("dyntrace stats"))


class CudaTest(CommandTestCase):
    SCRIPT = """\
        import dyntrace as dt
        def f(x, b):
            y = dt.tanh(x * 2.0 + b)
            return y / (y.sum(dim=0) + 100.0)
        x, b = dt.randn(64, 33).cuda(), dt.randn(33).cuda()
        for _ in range(5):
            f(x, b)
        print("failures:", dt.stats()["compile_failures"])
    """

    def test_cuda_graphs_option_reaches_the_backend_and_the_table(self):
        # The fake driver (tests/fake_cuda) accepts modules and records launches and graphs
        # without running kernels: what is checked is the plumbing and the counts.
        script = self.write("g.py", self.SCRIPT)
        env = {"DYNTRACE_LIBCUDA": FAKE_CUDA, "FAKE_CUDA_ACCEPT_MODULES": "1"}
        captured = {}
        for mode in ("true", "false"):
            result = self.dyntrace("--stats", "--cuda-graphs", mode, script, env_extra=env)
            self.assertRan(result)
            if "NVRTC" in result.stdout:
                # A loud skip where NVRTC is missing; where CI has it (DYNTRACE_REQUIRE_NVRTC=1)
                # an NVRTC failure fails.
                self.assertNotEqual(os.environ.get("DYNTRACE_REQUIRE_NVRTC"), "1", result.stdout)
                self.skipTest("NVRTC is not installed: " + result.stdout)
            self.assertIn("failures: []", result.stdout)
            table = result.stderr[result.stderr.index("dyntrace stats"):]
            match = re.search(r"^  CUDA graphs captured +(\d+)$", table, re.M)
            self.assertIsNotNone(match, table)
            captured[mode] = int(match.group(1))
            self.assertRegex(table, r"CUDA kernels (compiled \(NVRTC\)|cached) +[1-9]")
        self.assertEqual(captured, {"true": 1, "false": 0})
        result = self.dyntrace("--cuda-graphs", "sometimes", script, env_extra=env)
        self.assertEqual(result.returncode, 2)
        self.assertIn("--cuda-graphs must be auto, true or false", result.stderr)


def find_chromium():
    for name in ("chromium-headless-shell", "chromium", "chromium-browser"):
        path = shutil.which(name) or (os.path.exists(f"/usr/bin/{name}") and f"/usr/bin/{name}")
        if path:
            return path
    return None


class ReportTest(CommandTestCase):
    SCRIPT = """\
        import dyntrace as dt

        def block(x, w):
            h = dt.gelu(x @ w)
            if h.sum() < 0:  # a break whose source line needs escaping: <
                h = -h
            return dt.softmax(h, dim=-1)

        w = dt.randn(4, 4)
        for _ in range(3):
            block(dt.randn(2, 4), w)
        block(dt.randn(2, 4, dtype=dt.float64), w.to(dt.float64))
        """

    def make_report(self):
        script = self.write("model.py", self.SCRIPT)
        path = os.path.join(self.dir, "out.html")
        result = self.dyntrace("--report", path, script)
        self.assertRan(result)
        self.assertIn(f"report written to {path}", result.stderr)
        with open(path) as f:
            return path, f.read()

    def test_content(self):
        _, html = self.make_report()
        frame = html[html.index('<section class="frame"'):]
        self.assertIn("block <small>", frame)
        self.assertIn("def block(", frame)                                  # graph as code
        self.assertIn("dyntrace.gelu(", frame)
        self.assertGreaterEqual(frame.count("<svg"), 2)                      # graph as a picture
        self.assertRegex(frame, r"<svg[^>]*>(.|\n)*gelu(.|\n)*</svg>")
        self.assertIn("L[&#39;x&#39;] is a Tensor(float32", frame)            # guards, escaped
        self.assertIn("data-dependent branch", frame)                       # breaks ...
        self.assertIn("if h.sum() &lt; 0:  # a break whose source line needs escaping: &lt;", frame)
        self.assertNotIn("h.sum() < 0", html)                               # ... with escaped excerpts
        self.assertIn("expected float32, actual float64", frame)            # recompile reasons
        self.assertIn("cache_hits", html)                                   # the summary
        self.assertNotIn("<?xml", html)
        self.assertNotIn("<!DOCTYPE svg", html)

    def test_kernel_source_when_a_compiler_backend_ran(self):
        script = self.write("model.py", self.SCRIPT)
        probe = self.dyntrace("--backend", "cpu", self.write("probe.py", "pass\n"))
        self.assertEqual(probe.returncode, 0, probe.stderr)
        path = os.path.join(self.dir, "cpu.html")
        result = self.dyntrace("--backend", "cpu", "--report", path, script,
                               env_extra={"DYNTRACE_CACHE_DIR": os.path.join(self.dir, "kernel-cache")})
        self.assertRan(result)
        with open(path) as f:
            html = f.read()
        sources = re.findall(r'<pre class="kernel-source">(.*?)</pre>', html, re.S)
        self.assertTrue(sources and all(s.strip() for s in sources), html[:3000])
        self.assertIn("backend cpu", html)
        self.assertNotIn("<", "".join(sources))  # generated C++ is escaped too

    def test_self_contained(self):
        _, html = self.make_report()
        self.assertIsNone(re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html, re.I))
        self.assertIsNone(re.search(r"<link|@import|url\(\s*['\"]?https?:", html, re.I))
        self.assertIsNone(re.search(r"<script[^>]*\bsrc=", html, re.I))

    def test_renders_in_headless_chromium(self):
        chromium = find_chromium()
        if chromium is None:
            self.fail("headless Chromium is not installed (Debian: chromium-headless-shell or chromium; "
                      "tools/install_deps.sh installs it)")
        path, html = self.make_report()
        home = os.path.join(self.dir, "home")
        os.makedirs(home, exist_ok=True)

        def load(file):
            result = run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          f"--user-data-dir={os.path.join(self.dir, 'profile')}",
                          "--enable-logging=stderr", "--v=0", "--dump-dom", "file://" + file],
                         env_extra={"HOME": home}, timeout=120)
            self.assertEqual(result.returncode, 0, result.stderr[-3000:])
            console = [l for l in result.stderr.splitlines() if ":CONSOLE" in l]
            return result.stdout, console

        # The watcher sees console errors: a page with a broken script must show one.
        broken = self.write("broken.html", "<html><body><script>noSuchFunction();</script></body></html>")
        _, console = load(broken)
        self.assertTrue(any("noSuchFunction" in l for l in console), console)

        dom, console = load(path)
        self.assertEqual(console, [])
        body = re.search(r"<body([^>]*)>", dom)
        self.assertIsNotNone(body, dom[:2000])
        self.assertIn('data-rendered="ok"', body.group(1))  # the report's script ran to the end
        frames = int(re.search(r'data-frames="(\d+)"', body.group(1)).group(1))
        pictures = int(re.search(r'data-pictures="(\d+)"', body.group(1)).group(1))
        self.assertGreaterEqual(frames, 1)
        self.assertGreaterEqual(pictures, 2)
        self.assertEqual(pictures, html.count("<svg"))
        self.assertIn("def block(", dom)
        self.assertIn("data-dependent branch", dom)


if __name__ == "__main__":
    DYNTRACE = os.path.abspath(sys.argv[1])
    MODULE_DIR = os.path.dirname(os.path.abspath(sys.argv[2]))
    EXAMPLES = os.path.abspath(sys.argv[3])
    FAKE_CUDA = os.path.abspath(sys.argv[4])
    # One private kernel cache for every run: compiler backends build each kernel once, and no run
    # warns about an unusable default cache directory (HOME is not writable under Bazel).
    os.environ["DYNTRACE_CACHE_DIR"] = tempfile.mkdtemp(prefix="dyntrace-kernels-",
                                                        dir=os.environ.get("TEST_TMPDIR"))
    unittest.main(argv=sys.argv[:1] + sys.argv[5:], verbosity=2)
