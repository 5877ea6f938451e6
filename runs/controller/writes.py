"""The records a tick derived, written in a few statements, each only if unchanged (C22).

A batch locks its runs' rows (in the order of their ids, so two controllers writing
overlapping runs never wait on each other in a circle), keeps those whose version is
still the one read before their status, and writes them in one `UPDATE` of the runs (each
field a `CASE` over the runs that change it, the version guard in its `WHERE`) and one of
their tasks. A row another writer moved meanwhile (a cancel, another controller) is left as
that writer left it. No backend call is made in a batch (C14).

The statements are SQL of their own rather than Django's `Case`/`When`, whose expressions
are resolved one by one: ~1 ms each, seconds for a thousand runs. The values go through each
field's own conversion to the database (`get_db_prep_save`), as the ORM's would.
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
    same value of is set once, another is a `CASE` over the rows that change it (the others
    keep theirs). With `versions`, a row is written only at that version (and with `bump`,
    its version goes up by one); a run's `updated_at` is stamped. The rows written."""
    quote = connection.ops.quote_name
    pk_column = quote(_column(model, model._meta.pk.name))
    by_field: dict[str, list[tuple[Any, Any]]] = {}
    for pk, fields in changes.items():
        for name, value in fields.items():
            by_field.setdefault(name, []).append((pk, value))
    sets: list[str] = []
    params: list[Any] = []
    if model is Run and "updated_at" not in by_field:  # as every write of a run (RunQuerySet)
        by_field["updated_at"] = [(pk, timezone.now()) for pk in changes]
    for name, values in by_field.items():
        model_field = cast("models.Field[Any, Any]", model._meta.get_field(name))
        column = quote(_column(model, name))
        prepared = [(pk, model_field.get_db_prep_save(value, connection)) for pk, value in values]
        first = values[0][1]
        if len(values) == len(changes) and all(value == first for _, value in values):
            sets.append(f"{column} = %s")
            params.append(prepared[0][1])
            continue
        whens = " ".join("WHEN %s THEN %s" for _ in prepared)
        sets.append(f"{column} = CASE {pk_column} {whens} ELSE {column} END")
        for pk, value in prepared:
            params += [pk, value]
    if bump:
        sets.append(f"{quote('version')} = {quote('version')} + 1")
    if versions is None:
        where = f"{pk_column} IN ({', '.join('%s' for _ in changes)})"
        params += list(changes)
    else:
        pairs = ", ".join("(%s, %s)" for _ in changes)
        where = f"({pk_column}, {quote('version')}) IN ({pairs})"
        for pk in changes:
            params += [pk, versions[pk]]
    table = quote(model._meta.db_table)
    with connection.cursor() as cursor:
        # the names quoted, every value bound as a parameter
        cursor.execute(f"UPDATE {table} SET {', '.join(sets)} WHERE {where}", params)
        return int(cursor.rowcount)


def _column(model: type[models.Model], name: str) -> str:
    """The database column of a concrete field."""
    column = cast("models.Field[Any, Any]", model._meta.get_field(name)).column
    if column is None:
        raise ValueError(f"{model.__name__}.{name} has no column")
    return column
