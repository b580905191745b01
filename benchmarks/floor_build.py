#!/usr/bin/env python3
"""The floor `gpuplan build` is measured against: a process that only loads
fleet.yaml with libyaml's C loader and writes the same objects into the same
files with libyaml's C emitter.

    python benchmarks/floor_build.py FLEET OBJECTS.pickle OUT_DIR

OBJECTS.pickle maps each output path to its list of documents (made once,
untimed, by bench_build.py from gpuplan's own output)."""

import os
import pickle
import sys

import yaml


def main(fleet: str, objects: str, out: str) -> None:
    with open(fleet, "rb") as fh:
        yaml.load(fh, Loader=yaml.CSafeLoader)
    with open(objects, "rb") as fh:
        files = pickle.load(fh)
    for path, docs in files.items():
        full = os.path.join(out, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as fh:
            if isinstance(docs, str):
                fh.write(docs)
            else:
                yaml.dump_all(docs, fh, Dumper=yaml.CSafeDumper, sort_keys=False,
                              default_flow_style=False, allow_unicode=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
