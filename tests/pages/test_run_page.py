"""The run page: DAG, tasks, workers, plots, log tail, outputs, downloads, cancel."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from django.test import Client
from pytest_django import Settings

from runs.models import ResourceObservation, Run
from runs.store import task_paths
from tests import factories
from tests.pages.scenes import LOG_LINE, scan_run

pytestmark = pytest.mark.django_db
HX = {"HTTP_HX_REQUEST": "true"}


def page(client: Client, run: Run, query: str = "") -> str:
    response = client.get(f"/runs/{run.id}/{query}")
    assert response.status_code == 200
    return response.content.decode()


def test_the_dag_draws_every_task_with_its_state_and_progress(paul: Client) -> None:
    html = page(paul, scan_run())
    assert "<svg" in html and 'class="dag"' in html
    assert 'data-task="scan" data-state="running"' in html
    assert 'aria-label="scan: running, 67%"' in html  # 4 of 6 units done
    assert 'aria-label="summary: waiting, 0%"' in html


def test_the_tasks_table_writes_states_in_text_and_units_done(paul: Client) -> None:
    html = page(paul, scan_run())
    assert '<span class="badge state-running">running</span>' in html
    assert "4 of 6 units" in html


def test_the_workers_of_the_split_task_show_attempts_units_and_memory(paul: Client) -> None:
    """S9: workers with attempts, units done and claimed, peak memory against the limit."""
    html = page(paul, scan_run(), "?task=scan")
    assert 'data-worker="scan-w0"' in html and 'data-worker="scan-w1"' in html
    assert "0.75 / 1.50 GiB" in html
    assert "Peak memory per worker against its limit" in html
    assert "Units done over time: scan" in html


def test_the_log_tail_of_a_worker_is_shown_and_follows_while_the_run_lives(paul: Client) -> None:
    run = scan_run()
    html = page(paul, run, "?task=scan&pod=scan-w0")
    assert LOG_LINE in html
    response = paul.get(f"/runs/{run.id}/tasks/scan/logs/scan-w0/", HTTP_HX_TARGET="log-tail", **HX)
    tail = response.content.decode()
    assert response.status_code == 200 and LOG_LINE in tail
    assert "<html" not in tail


def test_the_log_tail_stops_polling_once_the_run_has_ended(paul: Client) -> None:
    run = scan_run(state="succeeded")
    response = paul.get(f"/runs/{run.id}/tasks/scan/logs/scan-w0/", HTTP_HX_TARGET="log-tail", **HX)
    assert "sse-connect" not in response.content.decode()


def test_a_log_tail_among_many_large_attempts_shows_the_newest_lines_and_says_it_was_cut(
    paul: Client, settings: Settings
) -> None:
    """64 kept attempts of 1 MiB of one pod: the page holds its share of
    SIMRUN_LOG_ANSWER_MAX_BYTES, the newest attempt's last line, and says it was cut."""
    settings.SIMRUN_LOG_ANSWER_MAX_BYTES = 256 * 1024
    run = scan_run(state="succeeded")
    logs = task_paths(run.id, "scan").logs
    for attempt in range(64):
        with (logs / f"scan-w0-{attempt}.log").open("wb") as handle:
            handle.truncate(1024 * 1024)
            handle.seek(0, os.SEEK_END)
            handle.write(f"the end of attempt {attempt}\n".encode())
    response = paul.get(f"/runs/{run.id}/tasks/scan/logs/scan-w0/", HTTP_HX_TARGET="log-tail", **HX)
    tail = response.content.decode()
    assert "attempt 63 of 64" in tail and "the end of attempt 63\n" in tail
    assert "cut: only its last lines" in tail and "SIMRUN_LOG_ANSWER_MAX_BYTES" in tail
    assert len(tail) < 256 * 1024


def test_outputs_are_listed_and_downloaded(paul: Client) -> None:
    """S10: outputs listed by their path relative to the store, and downloaded."""
    run = scan_run()
    html = page(paul, run)
    href = f"/runs/{run.id}/files/tasks/scan/out/table.csv"
    assert href in html
    response = paul.get(href)
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == b"point,value\n0,1.5\n"  # type: ignore[attr-defined]
    assert "attachment" in response["Content-Disposition"]


@pytest.mark.parametrize(
    "path",
    ["tasks/scan/out/../../../run.json", "tasks/scan/ledger/meta.json", "tasks/scan/out/missing"],
)
def test_a_download_outside_the_outputs_is_not_found(paul: Client, path: str) -> None:
    run = scan_run()
    assert paul.get(f"/runs/{run.id}/files/{path}").status_code == 404


def test_a_download_through_a_link_out_of_the_output_is_not_found(
    paul: Client, tmp_path: Path
) -> None:
    run = scan_run()
    secret = tmp_path / "secret.txt"
    secret.write_text("no")
    (task_paths(run.id, "scan").out / "link.txt").symlink_to(secret)
    assert paul.get(f"/runs/{run.id}/files/tasks/scan/out/link.txt").status_code == 404


def test_a_download_through_an_output_made_a_link_to_the_root_is_not_found(
    paul: Client,
) -> None:
    """A run's code replaced its out/ with a link to /: the page lists nothing of it and
    serves nothing through it."""
    run = scan_run()
    out = task_paths(run.id, "scan").out
    shutil.rmtree(out)
    out.symlink_to("/")
    assert "/files/tasks/scan/out/" not in page(paul, run)
    assert paul.get(f"/runs/{run.id}/files/tasks/scan/out/etc/passwd").status_code == 404


def test_a_page_whose_outputs_are_too_many_to_list_says_so(paul: Client) -> None:
    run = scan_run()
    out = task_paths(run.id, "scan").out
    for i in range(501):
        (out / f"part-{i:04d}.csv").write_text("x")
    html = page(paul, run)
    assert html.count(f"/runs/{run.id}/files/tasks/scan/out/") == 500
    assert "Not every file is listed: the page lists the first 500." in html


def test_an_unknown_run_or_task_is_not_found(paul: Client) -> None:
    run = scan_run()
    assert paul.get("/runs/nosuchrun/").status_code == 404
    assert paul.get(f"/runs/{run.id}/tasks/nope/logs/nope/").status_code == 404
    assert paul.get(f"/runs/{run.id}/tasks/scan/logs/summary/").status_code == 404


def test_the_owner_of_a_run_sees_the_cancel_button_another_person_does_not(
    paul: Client, sam: Client
) -> None:
    run = scan_run(by=factories.person())
    assert 'id="cancel-run"' in page(paul, run)
    assert 'id="cancel-run"' not in page(sam, run)


def test_cancel_asks_for_confirmation_without_javascript(paul: Client) -> None:
    run = scan_run()
    response = paul.get(f"/runs/{run.id}/cancel/")
    assert response.status_code == 200
    assert b"Yes, cancel the run" in response.content
    run.refresh_from_db()
    assert run.state == "running"


def test_cancel_posted_cancels_the_run_and_returns_to_it(paul: Client) -> None:
    """C16: cancel writes the run cancelled (by whom)."""
    run = scan_run()
    response = paul.post(f"/runs/{run.id}/cancel/")
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.id}/"
    run.refresh_from_db()
    assert run.state == "cancelled" and run.message == "cancelled by paul"


def test_a_cancelled_run_shows_cancelling_and_is_followed_until_a_worker_settled_it(
    paul: Client,
) -> None:
    """The cancel answers at once; the page says "cancelling…" and keeps
    following its stream while the workflow's cancel, the release and the logs are pending."""
    run = scan_run()
    html = paul.post(f"/runs/{run.id}/cancel/", follow=True).content.decode()
    assert '<span id="run-pending" class="badge pending">cancelling…</span>' in html
    assert "sse-connect" in html
    Run.objects.filter(pk=run.pk).update(pending_cancel=False, pending_logs=False)
    html = page(paul, run)
    assert 'id="run-pending"' not in html and "sse-connect" not in html


def test_a_run_being_deleted_shows_deleting_in_the_list(paul: Client) -> None:
    run = scan_run(state="failed", deleting=True)
    html = paul.get("/").content.decode()
    assert '<span class="badge pending">deleting…</span>' in html
    assert f'sse-swap="run-{run.id}"' in html


def test_cancel_by_htmx_redirects_the_browser(paul: Client) -> None:
    run = scan_run()
    response = paul.post(f"/runs/{run.id}/cancel/", **HX)
    assert response.status_code == 200 and response["HX-Redirect"] == f"/runs/{run.id}/"


def test_someone_else_cannot_cancel_a_run(sam: Client) -> None:
    """C16: another person's cancel from the page is refused; the run goes on."""
    run = scan_run(by=factories.person())
    assert sam.post(f"/runs/{run.id}/cancel/").status_code == 403
    run.refresh_from_db()
    assert run.state == "running"


def test_cancelling_an_ended_run_says_why(paul: Client) -> None:
    run = scan_run(state="succeeded")
    response = paul.post(f"/runs/{run.id}/cancel/", follow=True)
    assert "has ended" in response.content.decode()


def test_the_units_plot_projects_the_end_from_the_unit_times_of_this_run_so_far(
    paul: Client,
) -> None:
    html = page(paul, scan_run(), "?task=scan")
    assert "Projected end at" in html and "(unit time of this run so far)" in html
    assert 'class="projection"' in html


def test_the_units_plot_projects_the_end_from_the_unit_times_learned_before(
    paul: Client,
) -> None:
    """2 units left over 3 processes (w0 reports 2, w1 has not): one round of the learned 30 s."""
    earlier = factories.run(state="succeeded")
    ResourceObservation.objects.create(
        task_type="sleep", run=earlier, task_id="scan", worker="scan-w0", units_done=9,
        unit_seconds_median=30.0,
    )  # fmt: skip
    html = page(paul, scan_run(), "?task=scan")
    assert "(unit time learned from earlier runs)" in html
    assert re.search(r"Projected end at 30(\.\d)?s", html)  # the last unit done, plus 30 s


def test_the_run_page_plots_each_tasks_memory_against_its_limit(paul: Client) -> None:
    html = page(paul, scan_run())
    assert "Peak memory per task against its limit" in html
    assert "scan: 0.75 / 1.50 GiB; scan · per unit: 0.05 / ? GiB; summary: ? / ? GiB" in html


def test_the_run_page_says_how_many_units_were_reused_and_from_which_run(paul: Client) -> None:
    earlier = scan_run(state="cancelled")
    run = scan_run()
    run.tasks.filter(task_id="scan").update(reused={earlier.id: ["u000000", "u000001"]})
    html = page(paul, run)
    assert "reused 2 of 7 units (2 from" in html
    assert f'<a href="/runs/{earlier.id}/">{earlier.id}</a>' in html
    off = scan_run(reuse=False)
    assert "off (every unit computed)" in page(paul, off)


def test_a_task_that_reused_fewer_units_than_it_could_says_which_part_of_its_key_differed(
    paul: Client,
) -> None:
    """Reuse explains itself on the page too: per task, the part of the key that differed
    from the run compared with (linked), and a note when the service's copy of the plugin is
    not the model environment's."""
    earlier = scan_run(state="succeeded")
    run = scan_run()
    text = f"reused 0 of 6: setting 'seconds' differs from run {earlier.id}'s (2.0 here, 0.1 there)"
    copies = "the service's copy of plugin p 0.1 (p:T) (aaa) differs from the model environment's"
    run.tasks.filter(task_id="scan").update(
        reuse_note={"text": text, "compared_with": earlier.id, "copies": copies}
    )
    html = page(paul, run)
    cell = re.search(r'<td class="task-reuse">(.*?)</td>', html, re.S)
    assert cell, html
    assert text.replace("'", "&#x27;") in cell[1]
    assert f'<a href="/runs/{earlier.id}/">{earlier.id}</a>' in cell[1]
    assert copies.replace("'", "&#x27;") in cell[1]


def fully_reused(run: Run) -> Run:
    """Every unit of `scan` linked from an earlier run: none computed here, the run ended."""
    paths = task_paths(run.id, "scan")
    paths.progress.unlink()  # no unit was computed: no unit_done line
    run.tasks.filter(task_id="scan").update(reused={"earlier": [[0, 6]]}, state="done")
    return run


def test_a_fully_reused_run_shows_its_units_done_and_projects_no_end(paul: Client) -> None:
    """Item 7: no projected end over the total of an ended run; the reused units are done."""
    html = page(paul, fully_reused(scan_run(state="succeeded")), "?task=scan")

    assert "Projected end" not in html and 'class="projection"' not in html
    assert "6 of 6 units done (6 reused from earlier runs)" in html
    assert re.search(r'<td class="num">0 \+ 6 reused</td>', html), html


def test_memory_in_the_plot_and_in_the_table_is_rounded_alike(paul: Client) -> None:
    """0.625 GiB is 0.63 in the workers' table (floatformat) and in the figures' text."""
    run = scan_run()
    report = task_paths(run.id, "scan").report("scan-w0", 0)
    report.write_text(
        report.read_text().replace('"peak_memory_gb": 0.75', '"peak_memory_gb": 0.625')
    )
    html = page(paul, run, "?task=scan")
    assert "scan: 0.63 / 1.50 GiB" in html
    assert "0.63 / 1.50 GiB</td>" in html and "0.62" not in html


def test_the_memory_figures_have_headings_of_one_level(paul: Client) -> None:
    html = page(paul, scan_run(), "?task=scan")
    assert "<h3>Memory per worker against its limit</h3>" in html
    assert "<h3>Memory per task against its limit</h3>" in html


def test_a_full_disk_is_named_on_a_live_run_page(paul: Client, settings: object) -> None:
    """Below SIMRUN_DISK_MIN_FREE_MB free (here: more than any disk has) the page says which
    disk is full and that nothing of the run advances until space is freed."""
    settings.SIMRUN_DISK_MIN_FREE_MB = 1e12  # type: ignore[attr-defined]
    html = page(paul, scan_run())
    data_dir = settings.DATA_DIR  # type: ignore[attr-defined]
    assert re.search(rf'id="disk-full">The disk of {re.escape(str(data_dir))} is full: ', html)
    assert "nothing of this run advances until space is freed there" in html
