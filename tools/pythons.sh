# Sourced by the other tools: finds the CPython interpreters dyntrace is built and tested for.
#   python_311: Debian's python3 (3.11, with numpy from Debian)
#   python_312: CPython 3.12 from PATH or pyenv; empty when the machine has none
python_311=/usr/bin/python3
python_312=""
for candidate in "$(command -v python3.12 2>/dev/null)" \
                 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3; do
  if [[ -n "$candidate" && -x "$candidate" ]]; then
    python_312=$candidate
    break
  fi
done
