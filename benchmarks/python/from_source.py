# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""One top-level function of a source file, compiled alone: how the benchmarks run
a baseline's kernel or helper from the project that owns it (aiter's scheduler,
vLLM's split) without importing the rest of that file."""

import ast
from pathlib import Path


def function_from_source(path, name, scope):
    """Function `name` of the file at `path`, executed in `scope` (the globals it
    needs) at its own line numbers, so that Triton, which reads a kernel's source
    through inspect, finds it in the file."""
    source = Path(path).read_text()
    found = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == name]
    if not found:
        raise SystemExit(f"{path}: no top-level function {name}")
    node = found[0]
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    lines = source.splitlines()[first - 1:node.end_lineno]
    exec(compile("\n" * (first - 1) + "\n".join(lines) + "\n", str(path), "exec"), scope)  # noqa: S102
    return scope[name]


def constant_from_source(path, name):
    """The literal value of top-level assignment `name = ...` in the file at `path`."""
    for node in ast.parse(Path(path).read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise SystemExit(f"{path}: no top-level constant {name}")
