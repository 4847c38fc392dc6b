# Sourced by the other tools: finds the CPython interpreters dyntrace is built and tested for.
#   python_311: Debian's python3 (3.11, with numpy from Debian)
#   python_312: a working CPython 3.12 from pyenv or PATH; empty when the machine has none
python_311=/usr/bin/python3
python_312=""
# pyenv's shims exist for every installed version but only run the active ones, so each
# candidate is asked for its version rather than trusted by name.
for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3 \
                 "$(command -v python3.12 2>/dev/null)"; do
  if [[ -n "$candidate" && -x "$candidate" ]] &&
     [[ "$("$candidate" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" == 3.12 ]]; then
    python_312=$candidate
    break
  fi
done
