"""MkDocs hook: the option reference (``reference/options.md``), generated from the config schemas at build time.

Nothing in the page is written by hand, so it cannot drift from the code. At each build the hook

1. imports every command named in ``pyproject.toml``'s ``[project.scripts]``, so the schemas are registered in
   Hydra's ConfigStore exactly as running that command registers them;
2. reads each command's primary config (the top-level YAML files of the ``prism.conf`` package) for the schema it
   names first in its defaults and the group options it selects;
3. walks the schema dataclasses (fields, types, defaults, and the ``#`` comments written above each field) and the
   YAML files of every config group (what each option sets, and its leading comment).

It needs neither network nor a model: only Hydra, OmegaConf, PyYAML and PRISM's own modules.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.resources
import inspect
import json
import re
import tomllib
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

PAGE = "reference/options.md"
# Notes for keys whose schema field has no comment, by command and key; a note for a key that is gone fails.
NOTES = Path(__file__).resolve().parents[1] / "reference" / "option-notes.yaml"
# A group whose options each name their own schema in their defaults (``- /schema/model/<backend>@_here_``).
SCHEMA_GROUP_PREFIX = "schema/"
REPO_ROOT = Path(__file__).resolve().parents[2]


# ---- Where the schemas come from ---------------------------------------------------------------------------


def register_schemas() -> None:
    """Import every console command's module, so each registers its schemas as it does when run."""
    scripts = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    for target in scripts.values():
        importlib.import_module(target.split(":")[0])


def config_store_repo() -> dict[str, Any]:
    """Hydra's ConfigStore as a tree: group name -> subtree, ``<name>.yaml`` -> its ConfigNode."""
    from hydra.core.config_store import ConfigStore

    repo: dict[str, Any] = ConfigStore.instance().repo
    return repo


def schema_of(node: Any) -> type[Any]:
    """The dataclass a ConfigStore node was stored from."""
    from omegaconf import OmegaConf

    schema = OmegaConf.get_type(node.node)
    if schema is None or not dataclasses.is_dataclass(schema):
        raise TypeError(f"ConfigStore node {node.name!r} was not stored from a dataclass")
    return schema


def named_schemas() -> dict[str, type[Any]]:
    """Every dataclass schema stored at the top of the ConfigStore (``prism_schema`` -> ``PrismConfig``, ...).

    Hydra's own entries there (an empty placeholder config) are not dataclasses and are left out.
    """
    from omegaconf import OmegaConf

    return {name.removesuffix(".yaml"): schema_of(node) for name, node in config_store_repo().items()
            if name.endswith(".yaml") and dataclasses.is_dataclass(OmegaConf.get_type(node.node))}


def model_schemas() -> dict[str, type[Any]]:
    """The per-backend model schemas: backend name -> its dataclass, as registered under ``schema/model``.

    This is the one place that knows where the per-backend schemas live; it reads the ConfigStore, not the
    module that happens to define them, so a move of that table (into a backend registry) changes nothing here.
    """
    return group_schemas("schema/model")


def group_schemas(group: str) -> dict[str, type[Any]]:
    """The schemas stored in one ConfigStore group (e.g. ``schema/model``): option name -> dataclass."""
    tree: Any = config_store_repo()
    for part in group.split("/"):
        tree = tree.get(part, {})
    return {name.removesuffix(".yaml"): schema_of(node) for name, node in sorted(tree.items())
            if name.endswith(".yaml")}


def conf_dir() -> Path:
    """The shipped config tree (the ``prism.conf`` package, which Hydra reads as ``pkg://prism.conf``)."""
    return Path(str(importlib.resources.files("prism.conf")))


# ---- Reading dataclasses -------------------------------------------------------------------------------------


@dataclasses.dataclass
class Option:
    """One configuration key of a schema: its dotted key, type, default and what the source says of it."""

    key: str
    type: str
    default: str
    note: str


def field_comments(schema: type[Any]) -> dict[str, str]:
    """The ``#`` comment lines written directly above each field, joined, by field name.

    Inherited fields keep the comment of the class that declares them (``concurrency`` is commented once, in
    the remote base schema); a subclass that redeclares a field with a comment of its own wins.
    """
    comments: dict[str, str] = {}
    for cls in reversed(schema.__mro__):
        if not dataclasses.is_dataclass(cls):
            continue
        pending: list[str] = []
        for line in inspect.getsource(cls).splitlines()[1:]:
            stripped = line.strip()
            if stripped.startswith("#"):
                pending.append(stripped.lstrip("#").strip())
                continue
            match = re.match(r"\s+(\w+)\s*:", line)
            if match and pending:
                comments[match.group(1)] = " ".join(pending)
            pending = []
    return comments


def type_name(hint: Any) -> str:
    """A readable type: ``str | None``, ``list[str]``, ``dict[str, Any]``, a schema's class name."""
    if hint is type(None):
        return "None"
    if isinstance(hint, type) and not typing.get_args(hint):
        return hint.__name__
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " | ".join(type_name(arg) for arg in args)
    if origin is not None and args:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(type_name(a) for a in args)}]"
    return str(hint).replace("typing.", "")


def default_of(item: dataclasses.Field[Any]) -> Any:
    """A field's default value (``default_factory`` called), or ``dataclasses.MISSING`` when it has none."""
    if item.default is not dataclasses.MISSING:
        return item.default
    if item.default_factory is not dataclasses.MISSING:
        return item.default_factory()
    return dataclasses.MISSING


def walk_schema(schema: type[Any], prefix: str = "") -> Iterator[Option]:
    """Every key of ``schema`` in definition order, a nested schema's keys under ``<field>.``.

    A field whose type is itself a schema with a default instance (``dataset.fields``) is expanded; a field
    that selects a config group (``model: ModelConfig = MISSING``) is left to that group's own section.
    """
    hints = typing.get_type_hints(schema)
    notes = field_comments(schema)
    for item in dataclasses.fields(schema):
        if item.name == "defaults":  # Hydra's composition order, not configuration
            continue
        hint = hints[item.name]
        default = default_of(item)
        nested = next((a for a in (hint, *typing.get_args(hint)) if dataclasses.is_dataclass(a)), None)
        if isinstance(nested, type) and dataclasses.is_dataclass(default):
            yield from walk_schema(nested, f"{prefix}{item.name}.")
            continue
        if isinstance(nested, type) and default is None:  # an optional nested schema (conditions.base_format)
            yield Option(f"{prefix}{item.name}", f"{nested.__name__} | None", "`null`",
                         notes.get(item.name, "") or first_line(nested.__doc__))
            yield from walk_schema(nested, f"{prefix}{item.name}.")
            continue
        yield Option(f"{prefix}{item.name}", type_name(hint), show_default(default), notes.get(item.name, ""))


def first_line(doc: str | None) -> str:
    """The first paragraph of a docstring, on one line."""
    return " ".join((doc or "").strip().split("\n\n")[0].split())


def group_fields(schema: type[Any]) -> dict[str, type[Any]]:
    """The fields of a top-level schema that a config group fills: field name -> the group's schema."""
    hints = typing.get_type_hints(schema)
    return {item.name: hints[item.name] for item in dataclasses.fields(schema)
            if dataclasses.is_dataclass(hints[item.name]) and default_of(item) is not dataclasses.MISSING
            and str(default_of(item)) == "???"}


# ---- Showing values ----------------------------------------------------------------------------------------


def show_default(value: Any) -> str:
    """A schema default as the page shows it: ``???`` is required, ``${seed}`` an interpolation."""
    if value is dataclasses.MISSING or value == "???":
        return "required (`???`)"
    return show_value(value)


def show_value(value: Any, limit: int = 70) -> str:
    """A value in YAML's spelling, in backticks; a long collection is summarised by its size and keys."""
    if isinstance(value, dict):
        if not value:
            return "`{}`"
        keys = list(value)
        if all(not isinstance(v, dict | list) for v in value.values()):
            text = inline_yaml(value)
            if len(text) <= limit:
                return f"`{text}`"
        names = ", ".join(str(k) for k in keys[:8]) + (", ..." if len(keys) > 8 else "")
        return f"{len(keys)} {'entry' if len(keys) == 1 else 'entries'}: {escape(names)}"
    if isinstance(value, list):
        if not value:
            return "`[]`"
        text = inline_yaml(value)
        if len(text) <= limit and all(not isinstance(v, dict | list) for v in value):
            return f"`{text}`"
        named = [str(v["name"]) for v in value if isinstance(v, dict) and "name" in v]
        listed = f": {escape(', '.join(named))}" if named and len(named) == len(value) else ""
        return f"{len(value)} items{listed}"
    # A string with a line break or edge space reads best as JSON: "{question}\n\n{options}".
    text = json.dumps(value) if isinstance(value, str) and value != value.strip().replace("\n", "") \
        else inline_yaml(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"`{text}`"


def inline_yaml(value: Any) -> str:
    """One line of YAML flow style: ``null``, ``true``, ``[a, b]``, ``{scale: nominal}``."""
    text = str(yaml.safe_dump(value, default_flow_style=True, width=10**6, allow_unicode=True)).strip()
    text = text.removesuffix("\n...").removesuffix("...").strip()
    # A pipe inside a code span does not split a table cell (Python-Markdown's tables), so it stays as is.
    return text.replace("\n", "\\n")


def escape(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def options_table(options: list[Option]) -> list[str]:
    """A Markdown table of keys."""
    lines = ["| key | type | default | what it is |", "| --- | --- | --- | --- |"]
    lines += [f"| `{o.key}` | `{o.type}` | {o.default} | {escape(o.note)} |" for o in options]
    return lines


# ---- Reading the YAML tree ---------------------------------------------------------------------------------


def leading_comment(path: Path) -> str:
    """The comment block a YAML file opens with, on one line."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return " ".join(line for line in lines if line)


def load_yaml(path: Path) -> dict[str, Any]:
    """A config file's mapping (an empty file is an empty mapping)."""
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise TypeError(f"{path} does not hold a mapping")
    return data


def defaults_entries(data: dict[str, Any]) -> list[Any]:
    """A config file's defaults list, ``_self_`` left out."""
    return [entry for entry in data.get("defaults", []) if entry != "_self_"]


def group_options(group: str) -> list[tuple[str, Path]]:
    """The options of a config group: option name -> its YAML file (``shared/`` fragments left out)."""
    folder = conf_dir() / group
    return [(path.stem, path) for path in sorted(folder.glob("*.yaml"))]


def group_default_keys(data: dict[str, Any]) -> dict[str, Any]:
    """What a group option sets itself (its defaults list left out)."""
    return {key: value for key, value in data.items() if key != "defaults"}


def flatten(data: dict[str, Any], nested: set[str] | None = None, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Dotted keys of a nested mapping.

    A key in ``nested`` (a nested schema's) is opened; other mappings are values (a condition set's
    ``variants``) and stay whole. ``nested=None`` opens every mapping.
    """
    for key, value in data.items():
        if isinstance(value, dict) and value and (nested is None or f"{prefix}{key}" in nested):
            yield from flatten(value, nested, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def nested_keys(schema: type[Any] | None) -> set[str]:
    """The dotted keys of a schema that are nested schemas themselves (``fields``, ``filters.``...)."""
    if schema is None:
        return set()
    return {o.key.rsplit(".", 1)[0] for o in walk_schema(schema) if "." in o.key}


def schema_defaults(schema: type[Any] | None) -> dict[str, str]:
    """Each key's default as the page shows it, to leave out what an option sets to the default anyway."""
    return {} if schema is None else {o.key: o.default for o in walk_schema(schema)}


# ---- The page ----------------------------------------------------------------------------------------------


def app_of(path: Path, data: dict[str, Any]) -> str:
    """The command a primary config belongs to: its help's app name, else ``prism.<file>``."""
    app = data.get("hydra", {}).get("help", {}).get("app_name")
    if isinstance(app, str):
        return app
    return "prism" if path.stem == "config" else f"prism.{path.stem}"


def anchor(text: str) -> str:
    """The id MkDocs gives a heading of this text (toc's default slugify)."""
    slug = re.sub(r"[^\w\s-]", "", text.lower()).strip()
    return re.sub(r"[-\s]+", "-", slug)


def group_section(group: str, schema: type[Any] | None, level: str,
                  annotate: Callable[[list[Option]], list[Option]] = list) -> list[str]:
    """A config group: its schema's keys (or each backend's, for the model group) and what each option sets.

    ``annotate`` completes a table's keys before it is drawn (the hand-written notes).
    """
    lines: list[str] = []
    per_option: dict[str, type[Any]] = {}
    schema_group_of: dict[str, str] = {}
    for name, path in group_options(group):
        for entry in defaults_entries(load_yaml(path)):
            target = str(entry).lstrip("/").split("@")[0]
            if target.startswith(SCHEMA_GROUP_PREFIX):
                group_name, _, option = target.rpartition("/")
                schema_group_of[name] = option
                per_option[name] = group_schemas(group_name)[option]
    if per_option:
        # The model group's schemas are every registered backend's (model_schemas), used by an option or not.
        backends = model_schemas() if group == "model" else {schema_group_of[n]: s for n, s in per_option.items()}
        for backend, backend_schema in sorted(backends.items()):
            lines += ["", f"{level}# Schema `{backend}`: {backend_schema.__name__}", "",
                      first_line(backend_schema.__doc__), ""]
            lines += options_table(annotate([dataclasses.replace(o, key=f"{group}.{o.key}")
                                             for o in walk_schema(backend_schema)]))
    elif schema is not None:
        lines += ["", f"Schema: `{schema.__name__}`. {first_line(schema.__doc__)}", ""]
        lines += options_table(annotate([dataclasses.replace(o, key=f"{group}.{o.key}") for o in walk_schema(schema)]))
    lines += ["", f"{level}# Options of `{group}`", "",
              "| option | what it sets | file |" if not per_option else "| option | schema | what it sets | file |",
              "| --- | --- | --- |" if not per_option else "| --- | --- | --- | --- |"]
    for name, path in group_options(group):
        data = load_yaml(path)
        includes = [str(e) for e in defaults_entries(data) if not str(e).lstrip("/").startswith(SCHEMA_GROUP_PREFIX)]
        option_schema = per_option.get(name, schema)
        defaults = schema_defaults(option_schema)
        opened = nested_keys(option_schema) if option_schema is not None else None
        sets = [f"`{key}`: {show_value(value)}" for key, value in flatten(group_default_keys(data), opened)
                if defaults.get(key) != show_value(value)]
        if includes:
            sets.insert(0, "includes " + ", ".join(f"`{i}`" for i in includes))
        cell = "<br>".join(sets) or "nothing beyond the schema's defaults"
        where = f"`prism/conf/{group}/{path.name}`"
        row = f"| `{group}={name}` | {cell} | {where} |" if not per_option else \
              f"| `{group}={name}` | `{schema_group_of.get(name, '')}` | {cell} | {where} |"
        lines.append(row)
    descriptions = [(name, leading_comment(path)) for name, path in group_options(group) if leading_comment(path)]
    if descriptions:
        lines += ["", "What each option's file says of itself:", ""]
        lines += [f"- `{group}={name}`: {escape(text)}" for name, text in descriptions]
    return lines


def load_notes() -> dict[str, dict[str, str]]:
    """The hand-written notes: command -> dotted key -> note."""
    data = yaml.safe_load(NOTES.read_text()) if NOTES.exists() else {}
    return {str(app): {str(k): str(v) for k, v in keys.items()} for app, keys in (data or {}).items()}


def annotated(app: str, notes: dict[str, dict[str, str]], used: set[tuple[str, str]],
              options: list[Option]) -> list[Option]:
    """``options`` with each key that has no comment of its own given its note; records the notes used."""
    for option in options:
        note = notes.get(app, {}).get(option.key)
        if note is not None:
            used.add((app, option.key))
            if not option.note:
                option.note = note
    return options


def render() -> str:
    """The whole page.

    Raises:
        ValueError: If ``option-notes.yaml`` names a key no schema has (renamed or removed): the note is stale.
    """
    register_schemas()
    notes = load_notes()
    used: set[tuple[str, str]] = set()
    schemas = named_schemas()
    primaries = [(path, load_yaml(path)) for path in sorted(conf_dir().glob("*.yaml"))]
    primaries.sort(key=lambda item: (item[0].stem != "config", item[0].stem))
    out = [
        "# Configuration options",
        "",
        "!!! note \"Generated\"",
        "    This page is generated at every build of the documentation from the typed schemas registered in",
        "    Hydra's ConfigStore and the YAML files of the shipped config tree (`prism/conf/`), so it lists",
        "    exactly what the installed PRISM accepts. A key not listed here is refused with Hydra's error.",
        "",
        "Set any key on the command line as `key=value` (`dataset.n=20`), pick a group option as `group=option`",
        "(`model=llama3`), and print the composed configuration with `--cfg job`. `required` keys (`???`) must",
        "be set by a group option or on the command line. `${seed}` is an interpolation: the value of the",
        "top-level `seed`.",
        "",
        "| command | config file | schema | groups (default option) |",
        "| --- | --- | --- | --- |",
    ]
    sections: list[str] = []
    documented_groups: set[str] = set()
    for path, data in primaries:
        app = app_of(path, data)
        entries = defaults_entries(data)
        schema_name = next((str(e) for e in entries if isinstance(e, str)), "")
        schema = schemas.get(schema_name)
        if schema is None:
            continue
        picks = {k: v for e in entries if isinstance(e, dict) for k, v in e.items()}
        heading = f"python -m {app}"
        out.append(f"| [`{heading}`](#{anchor(heading)}) | `prism/conf/{path.name}` | `{schema.__name__}` | "
                   + ", ".join(f"`{g}={o}`" for g, o in picks.items()) + " |")
        sections += ["", f"## {heading}", "", f"`prism/conf/{path.name}`, schema `{schema.__name__}`: "
                     f"{first_line(schema.__doc__)}", ""]
        if picks:
            sections += ["Its defaults list picks " + ", ".join(f"`{g}={o}`" for g, o in picks.items()) + ".", ""]
        groups = group_fields(schema)
        top = [o for o in walk_schema(schema) if o.key not in groups]
        own = {key: value for key, value in flatten(data, nested_keys(schema)) if key not in ("defaults", "hydra")}
        for option in top:
            if option.key in own and show_value(own[option.key]) != option.default and own[option.key] != "???":
                option.note = (option.note + " " if option.note else "") + \
                    f"`prism/conf/{path.name}` sets {show_value(own[option.key])}."
        annotate = functools.partial(annotated, app, notes, used)
        sections += ["### Top-level keys", "", *options_table(annotate(top))]
        for group, group_schema in groups.items():
            if group in documented_groups:
                sections += ["", f"### {group}", "",
                             f"The `{group}` group, as for [`python -m prism`](#{anchor(group)}); "
                             f"this command's default: `{group}={picks.get(group, '')}`."]
                continue
            documented_groups.add(group)
            sections += ["", f"### {group}", ""]
            if group in picks:
                sections += [f"Default option: `{group}={picks[group]}`.", ""]
            sections += group_section(group, group_schema, "###", annotate)
    hydra_groups = sorted(p.relative_to(conf_dir()).as_posix() for p in (conf_dir() / "hydra").glob("*")
                          if p.is_dir()) if (conf_dir() / "hydra").is_dir() else []
    for group in hydra_groups:
        sections += ["", f"## {group}", "",
                     f"Hydra's own group, with PRISM's options added: select one with `{group}=NAME`.", ""]
        sections += group_section(group, None, "##")
    stale = sorted(f"{app}: {key}" for app, keys in notes.items() for key in keys if (app, key) not in used)
    if stale:
        raise ValueError(f"{NOTES} has notes for keys no schema has any more: {', '.join(stale)}; "
                         "rename or remove them there.")
    return "\n".join(out + sections) + "\n"


def on_files(files: Any, config: Any) -> Any:
    """MkDocs event: add the generated page to the site's files."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=render()))
    return files


if __name__ == "__main__":  # print the page: python docs/hooks/options_reference.py
    print(render(), end="")
