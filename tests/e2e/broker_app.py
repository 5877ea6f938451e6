"""A Celery app on the embedded default's file broker, for counting what a worker consumes.

`celery -A tests.e2e.broker_app worker` consumes `record` messages; each creates a file named
for its index under BROKER_TEST_RECORDS (a second delivery of one index is noted in `twice`).
BROKER_TEST_DIR is the broker's folder. BROKER_TEST_TRANSPORT picks the transport (the
simrun one by default; kombu's `filesystem` to watch the failure it fixes).
"""

from __future__ import annotations

import os
from pathlib import Path

from celery import Celery

FOLDER = Path(os.environ.get("BROKER_TEST_DIR", "broker"))
TRANSPORT = os.environ.get("BROKER_TEST_TRANSPORT", "simrun_site.file_broker:Transport")

app = Celery("broker-test")
app.conf.update(
    broker_url="filesystem://localhost/",
    broker_transport=TRANSPORT,
    broker_transport_options={
        "data_folder_in": str(FOLDER / "in"),
        "data_folder_out": str(FOLDER / "in"),
        "control_folder": str(FOLDER / "control"),
        "store_processed": False,
        "polling_interval": 0.01,
    },
    task_default_queue="counted",
    task_ignore_result=True,
    worker_prefetch_multiplier=1,
)


@app.task(name="record")
def record(index: int, padding: str) -> None:
    """Note one delivery of message `index`."""
    records = Path(os.environ["BROKER_TEST_RECORDS"])
    try:
        (records / str(index)).open("x").close()
    except FileExistsError:
        with (records / "twice").open("a") as twice:
            twice.write(f"{index}\n")
