"""Walk one run's config: which module reads which config field, and how far each field travels.

Every config dataclass (``prism.config``'s schemas and each backend's model schema) is instrumented so a read
of one of its fields records the reading module (its "room"); then one real run is made through
``prism.run.pipeline.run`` with the given overrides. The report counts the distinct (field, room) reads, the
rooms, and the fields read in more than one room (a field that climbs from the room that uses it to another:
a value handed on instead of the value's one user reading it). Run it on two trees to compare before and after::

    PYTHONPATH=. python scripts/config_walk.py model=replay model.path=RESPONSES.jsonl conditions=robustness \\
        dataset.n=10 store.enabled=false tracking.uri=sqlite:////tmp/walk/mlflow.db

Reads by the config code itself (``prism.config.*``: checks, to_schema) and by dataclass machinery are left
out: they are the schema reading itself, not a room using a value.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any


def instrument(reads: dict[str, set[str]]) -> None:
    """Patch every config dataclass so a field read records ``group.field`` -> the reading module."""
    import prism.config as config
    from prism.backends.registry import backend_entries

    schemas = {obj for obj in vars(config).values() if isinstance(obj, type) and dataclasses.is_dataclass(obj)}
    schemas |= {entry.schema for entry in backend_entries().values()}
    for schema in schemas:
        names = {f.name for f in dataclasses.fields(schema)}
        original = schema.__getattribute__

        def reading(self: Any, name: str, _names: set[str] = names, _original: Any = original,
                    _schema: type = schema) -> Any:
            if name in _names:
                module = sys._getframe(1).f_globals.get("__name__", "?")
                if module.startswith("prism.") and not module.startswith("prism.config"):
                    reads[f"{_schema.__name__}.{name}"].add(module)
            return _original(self, name)

        schema.__getattribute__ = reading  # type: ignore[method-assign]


def main(overrides: list[str]) -> None:
    """Compose the config from ``overrides``, make one run, print the walk."""
    from hydra import compose, initialize_config_module

    from prism.conf import register_configs
    from prism.config import PrismConfig, to_schema
    from prism.run.pipeline import run

    register_configs()
    reads: dict[str, set[str]] = defaultdict(set)
    with initialize_config_module("prism.conf", version_base="1.3"):
        cfg = compose("config", overrides=overrides)
    experiment = to_schema(cfg, PrismConfig)
    instrument(reads)
    with tempfile.TemporaryDirectory() as out:
        run(experiment, output_dir=Path(out))
    rooms: dict[str, set[str]] = defaultdict(set)
    for key, modules in reads.items():
        for module in modules:
            rooms[module].add(key)
    travelling = {key: sorted(modules) for key, modules in reads.items() if len(modules) > 1}
    print(f"config fields read: {len(reads)}; (field, room) reads: {sum(len(m) for m in reads.values())}; "
          f"rooms: {len(rooms)}; fields read in more than one room: {len(travelling)}")
    print("\nrooms (module: fields it reads)")
    for module in sorted(rooms):
        print(f"  {module}: {len(rooms[module])}")
    print("\nfields read in more than one room")
    for key in sorted(travelling):
        print(f"  {key}: {', '.join(travelling[key])}")


if __name__ == "__main__":
    main(sys.argv[1:])
