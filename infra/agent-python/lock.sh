#!/usr/bin/env bash
# Re-pins requirements.txt from requirements.in, every file hashed (pip-compile from pip-tools, in a throwaway venv),
# through constraints.txt. Run after editing requirements.in; commit both.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tools="$(mktemp -d)"
trap 'rm -rf "$tools"' EXIT
python3 -m venv "$tools"
"$tools/bin/pip" install --quiet pip-tools==7.6.2
cd "$here"
"$tools/bin/pip-compile" --quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url --no-emit-find-links \
  --constraint=constraints.txt --output-file=requirements.txt requirements.in
