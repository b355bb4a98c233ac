"""Task-file validation: ours (tasks.schema.load_task) against the maintained library, jsonschema.

    python benchmarks/bench_schema.py

A JSON Schema of lift-cube's top level (every key required, no others, the types found) is what
jsonschema can check here; the loader checks every level plus what a schema cannot say (robot
file, materials, cross-field rules) and builds the Task. Printed: both messages for an unknown
key and a wrong type, and the time per file (ours: parse + every check + build; jsonschema: that
structure only). Decision in tasks/schema.py's docstring.
"""
import json
import time
from pathlib import Path

import jsonschema

from caliper_jax.errors import CaliperError
from tasks.schema import find_task, load_task

TYPES = {dict: "object", list: "array", str: "string", int: "integer", float: "number", bool: "boolean"}


def ours_message(src: Path, doc: dict) -> str:
    """load_task's verdict on ``doc`` written next to ``src`` (so its relative robot path resolves)."""
    path = src.with_name(".bench-" + src.name)
    path.write_text(json.dumps(doc))
    try:
        load_task(path)
        return "accepted"
    except CaliperError as exc:
        return str(exc)
    finally:
        path.unlink()


def per_call(fn, n=200) -> float:
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n


def main():
    src = Path(find_task("lift-cube"))
    doc = json.loads(src.read_text())
    # the top level as a JSON Schema: every key required, no others, the types found
    schema = {"type": "object", "additionalProperties": False, "required": sorted(doc),
              "properties": {k: {"type": TYPES[type(v)]} for k, v in doc.items()}}
    validator = jsonschema.Draft202012Validator(schema)
    cases = {"unknown key 'horizn_s'": {**doc, "horizn_s": 5}, "fps as a string": {**doc, "fps": "50"}}
    for name, bad in cases.items():
        theirs = "; ".join(f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(bad))
        print(f"{name}\n  ours:       {ours_message(src, bad)}\n  jsonschema: {theirs or 'accepted'}")
    ours_t, js_t = per_call(lambda: load_task(src)), per_call(lambda: validator.validate(doc))
    print(f"load_task (parse + every check + build): {ours_t * 1e3:.2f} ms; "
          f"jsonschema, top-level structure only: {js_t * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
