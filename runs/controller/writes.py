"""The records a tick derived, written in a few statements, each only if unchanged (C22).

A batch locks its runs' rows (in the order of their ids, so two controllers writing
overlapping runs never wait on each other in a circle), keeps those whose version is
still the one read before their status, and writes them in one `UPDATE` of the runs (joined
on a list of their ids, the versions read and their new fields; the version guard in its
`WHERE`) and one of their tasks. A row another writer moved meanwhile (a cancel,
another controller) is left as that writer left it. No backend call is made in a batch (C14).

The statements are SQL of their own rather than Django's `Case`/`When`, whose expressions
are resolved one by one: ~1 ms each, seconds for a thousand runs; nor a `CASE` over the ids
in SQL, which Postgres evaluates branch by branch for each row (a batch of 500 runs cost four
to five times the join). The values go through each field's own conversion to the database
(`get_db_prep_save`), as the ORM's would.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from django.db import connection, models, transaction
from django.utils import timezone

from runs.models import Run, Task

BATCH = 500  # runs a statement writes at most


@dataclass(frozen=True)
class Write:
    """A run's new fields and its tasks', to write if its version is still `version`."""

    run_id: str
    version: int  # the version the record was read at, before its status
    run: Mapping[str, Any]
    tasks: Mapping[int, Mapping[str, Any]] = field(default_factory=dict)  # task pk → fields


def write_if_unchanged(writes: Sequence[Write]) -> set[str]:
    """C22: write each run (its version bumped) and its tasks if its version is unchanged;
    the ids of the runs written. One transaction (one commit), a few statements a batch."""
    written: set[str] = set()
    ordered = sorted(writes, key=lambda w: w.run_id)  # rows locked in one order by everyone
    with transaction.atomic():
        for start in range(0, len(ordered), BATCH):
            written |= _write_batch(ordered[start : start + BATCH])
    return written


def _write_batch(batch: Sequence[Write]) -> set[str]:
    # The batch's rows locked until the commit: a version read here stays the row's until
    # the write below, so the runs written are exactly those kept here.
    locked = Run.objects.select_for_update().filter(pk__in=[w.run_id for w in batch])
    versions = dict(locked.order_by("pk").values_list("pk", "version"))
    kept = [w for w in batch if versions.get(w.run_id) == w.version]
    if not kept:
        return set()
    update_rows(
        Run,
        {w.run_id: w.run for w in kept},
        versions={w.run_id: w.version for w in kept},
        bump=True,
    )
    tasks = {pk: fields for w in kept for pk, fields in w.tasks.items()}
    if tasks:
        update_rows(Task, tasks)
    return {w.run_id for w in kept}


def note_derived_from(notes: Mapping[str, tuple[int, str]]) -> None:
    """The status each record was derived from (`derived_from`, by run id with the version it
    was derived at), where only that changed: no new version (nothing a reader sees changed),
    and only at the version read (C22)."""
    items = list(notes.items())
    for start in range(0, len(items), BATCH):
        batch = dict(items[start : start + BATCH])
        update_rows(
            Run,
            {pk: {"derived_from": text} for pk, (_, text) in batch.items()},
            versions={pk: version for pk, (version, _) in batch.items()},
        )


def update_rows(
    model: type[models.Model],
    changes: Mapping[Any, Mapping[str, Any]],
    *,
    versions: Mapping[Any, int] | None = None,
    bump: bool = False,
) -> int:
    """One `UPDATE` giving each row (by primary key) its fields: a field every row gets the
    same value of is set once; the others come from a list of rows (`_listed`, joined on the
    key, so the statement costs the same per row however many rows it writes), a field only
    some rows change with a flag saying which (the others keep theirs). With `versions`, a
    row is written only at that version (and with `bump`, its version goes up by one); a
    run's `updated_at` is stamped. The rows written."""
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    keys = list(changes)
    sets, params = [], []
    columns: dict[str, Column] = {"k": (model._meta.pk, keys)}
    if versions is not None:
        columns["ver"] = (_field(model, "version"), [versions[pk] for pk in keys])
    for i, (name, values) in enumerate(_by_field(model, changes).items()):
        model_field = _field(model, name)
        column = quote(_column(model, name))
        first = next(iter(values.values()))
        if len(values) == len(keys) and all(value == first for value in values.values()):
            sets.append(f"{column} = {_placeholder(model_field)}")
            params.append(model_field.get_db_prep_save(first, connection))
            continue
        columns[f"f{i}"] = (model_field, [values.get(pk) for pk in keys])
        if len(values) == len(keys):
            sets.append(f"{column} = v.f{i}")
            continue
        columns[f"s{i}"] = (BOOLEAN, [pk in values for pk in keys])
        sets.append(f"{column} = CASE WHEN v.s{i} THEN v.f{i} ELSE {table}.{column} END")
    version = quote("version")
    if bump:
        sets.append(f"{version} = {table}.{version} + 1")
    where = f"{table}.{quote(_column(model, model._meta.pk.name))} = v.k"
    if versions is not None:
        where += f" AND {table}.{version} = v.ver"
    listed, listed_params = _listed(list(columns.values()))
    sql = (
        f"WITH v ({', '.join(columns)}) AS ({listed}) "
        f"UPDATE {table} SET {', '.join(sets)} FROM v WHERE {where}"
    )
    with connection.cursor() as cursor:
        # the names quoted, every value bound as a parameter
        cursor.execute(sql, listed_params + params)  # the list comes first
        return int(cursor.rowcount)


Column = tuple["models.Field[Any, Any]", list[Any]]  # a field and its value in every row
BOOLEAN = models.BooleanField()


def _field(model: type[models.Model], name: str) -> models.Field[Any, Any]:
    return cast("models.Field[Any, Any]", model._meta.get_field(name))


def _by_field(
    model: type[models.Model], changes: Mapping[Any, Mapping[str, Any]]
) -> dict[str, dict[Any, Any]]:
    """The values of each field, by primary key; a run's `updated_at` stamped now unless
    given (as every write of a run, `RunQuerySet`)."""
    by_field: dict[str, dict[Any, Any]] = {}
    for pk, fields in changes.items():
        for name, value in fields.items():
            by_field.setdefault(name, {})[pk] = value
    if model is Run and "updated_at" not in by_field:
        now = timezone.now()
        by_field["updated_at"] = dict.fromkeys(changes, now)
    return by_field


def _listed(columns: list[Column]) -> tuple[str, list[Any]]:
    """The rows to join, as a query of columns, and its parameters, each value converted by
    its field. On Postgres, one array a column (`UNNEST`): a parameter a column, not a value
    (the driver parses a query's placeholders one by one, ~7 µs each); elsewhere a `VALUES`
    list."""
    prepared = [
        [model_field.get_db_prep_save(value, connection) for value in values]
        for model_field, values in columns
    ]
    if connection.vendor == "postgresql":
        arrays = ", ".join(f"CAST(%s AS {f.db_type(connection)}[])" for f, _ in columns)
        return f"SELECT * FROM UNNEST({arrays})", prepared
    row = f"({', '.join('%s' for _ in columns)})"
    rows = list(zip(*prepared, strict=True))
    return f"VALUES {', '.join([row] * len(rows))}", [value for row in rows for value in row]


def _placeholder(model_field: models.Field[Any, Any]) -> str:
    """A parameter of the field's type: Postgres types a parameter from its value, so it is
    cast; SQLite needs no cast (and would convert text that looks like a number)."""
    if connection.vendor != "postgresql":
        return "%s"
    return f"CAST(%s AS {model_field.db_type(connection)})"


def _column(model: type[models.Model], name: str) -> str:
    """The database column of a concrete field."""
    column = cast("models.Field[Any, Any]", model._meta.get_field(name)).column
    if column is None:
        raise ValueError(f"{model.__name__}.{name} has no column")
    return column
