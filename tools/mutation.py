"""Mutation testing of the rule modules with mutmut, one module at a time (not run by CI).

Each module is mutated in a stage of its own under `.mutation/<module>/`: a copy of the package
that holds it, of `tests/` and of `pyproject.toml` with a `[tool.mutmut]` section naming the
module and its fast unit tests (never the end-to-end suites). mutmut copies the stage into
`mutants/`, which it puts first on `sys.path`, so the tests import the mutated package while
everything else (settings, other packages) comes from the work tree as usual. The harness
lives under `harness/src/`, so its package is staged at the top of the stage.

    nice -n 10 .venv-mutation/bin/python tools/mutation.py rules ledger    # some modules
    nice -n 10 .venv-mutation/bin/python tools/mutation.py                 # every module
    .venv-mutation/bin/python tools/mutation.py --list

The tests run against Postgres (`SIMRUN_TEST_DATABASE_URL`, default the `h20m` database; its
test database is kept between mutants with `--reuse-db`) and Redis (`SIMRUN_TEST_REDIS_URL`).
Each module's score is written to `.mutation/<module>/score.json` (mutmut's counts, the
score line, the commit and date, a SHA-256 digest of each mutated file) and its surviving
mutants to `.mutation/<module>/survivors.txt` (with their diffs given `--diffs`; `mutmut show
NAME` in the stage shows one). `--record` also writes the score into `tools/mutation_scores.json`,
which `tests/tools/test_mutation_scores.py` holds to the files: a scored module changed since
its score fails that test until it is scored again (or its entry removed).

A module whose tests are slow takes hours (a mutant a 30 s, hundreds of mutants):
`--stop-after MINUTES` ends the run then and keeps mutmut's results so far in
`tools/mutation_parts/<module>/` (commit them), and the next run of that module, here or on
another machine, takes them up: mutmut keeps the outcome of each mutant of a function whose
code has not changed and runs only the rest. A run that checked every mutant removes them;
its score says `taken_up` for how many outcomes came from earlier runs.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import difflib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutation"
SCORES = ROOT / "tools" / "mutation_scores.json"
PARTS = ROOT / "tools" / "mutation_parts"  # mutmut's results of runs stopped before their end
ALSO_COPIED = ("deploy", "examples")  # the config map the simulator reads, example workflows


@dataclass(frozen=True)
class Module:
    """One module to mutate: its package's directory in the work tree, the directory the
    package is staged as, the paths in the stage of the module and of the modules split off
    it, and its fast unit tests."""

    package: str
    staged_as: str
    paths: tuple[str, ...]
    tests: tuple[str, ...]

    def source(self, path: str) -> Path:
        """The work tree's file of a staged path (`simrun_harness/ledger.py` ->
        `harness/src/simrun_harness/ledger.py`)."""
        inside = Path(path).relative_to(self.staged_as)
        return ROOT / self.package / inside

    def digests(self) -> dict[str, str]:
        """SHA-256 of each mutated file, by its path in the work tree."""
        found = {}
        for path in self.paths:
            source = self.source(path)
            found[str(source.relative_to(ROOT))] = hashlib.sha256(source.read_bytes()).hexdigest()
        return found


# the controller's tests, all fast (20 s in all), and the Argo backend's restarted and steady
# ticks (its revisions: the local backend has none); mutmut runs, for each mutant, only those
# that call the function it mutates
CONTROLLER_TESTS = ("tests/runs/controller", "tests/cluster/argo/test_tick_calls.py")
SCORED = (  # the modules whose scores docs/testing.md gives and tools/mutation_scores.json keeps
    "plans",
    "planner",
    "reuse",
    "services-reuse",
    "rules",
    "reconcile",
    "ledger",
    "argo-status",
    "local-statuses",
    "local-dag",
)
LEDGER_TESTS = (
    "tests/harness/test_ledger.py",
    "tests/harness/test_ledger_creation.py",
    "tests/harness/test_ledger_partials.py",
)
MODULES: dict[str, Module] = {
    "plans": Module(
        "runs",
        "runs",
        ("runs/plans.py",),
        (
            "tests/runs/test_planner.py",
            "tests/runs/test_planner_examples.py",
            "tests/runs/test_plans.py",
        ),
    ),
    "planner": Module(
        "runs",
        "runs",
        ("runs/planner.py", "runs/plan_units.py"),
        (
            "tests/runs/test_planner.py",
            "tests/runs/test_planner_examples.py",
            "tests/runs/test_planner_rounding.py",
        ),
    ),
    "reuse": Module(
        "runs",
        "runs",
        ("runs/reuse.py",),
        (
            "tests/runs/test_reuse_keys.py",
            "tests/runs/test_reuse_key_format.py",
            "tests/runs/test_reuse_differences.py",
            "tests/runs/test_reuse_plans.py",
        ),
    ),
    "services-reuse": Module(
        "runs",
        "runs",
        ("runs/services/reuse.py",),
        (
            "tests/runs/test_reuse_keys.py",
            "tests/runs/test_reuse_key_format.py",
            "tests/runs/test_reuse_plans.py",
            "tests/runs/test_reuse_after_command.py",
            "tests/runs/test_reuse_outputs.py",
            "tests/runs/test_plugin_hosts.py",
            "tests/cluster/argo/test_plugin_hosts.py",
        ),
    ),
    "rules": Module(
        "runs", "runs", ("runs/controller/rules.py", "runs/controller/advice.py"), CONTROLLER_TESTS
    ),
    "reconcile": Module("runs", "runs", ("runs/controller/reconcile.py",), CONTROLLER_TESTS),
    "ledger": Module(
        "harness/src/simrun_harness", "simrun_harness", ("simrun_harness/ledger.py",), LEDGER_TESTS
    ),
    "argo-status": Module(
        "cluster",
        "cluster",
        ("cluster/argo/status.py",),
        ("tests/cluster/argo/test_status.py", "tests/cluster/argo/test_status_nodes.py"),
    ),
    "local-statuses": Module(
        "cluster",
        "cluster",
        ("cluster/local/statuses.py",),
        (
            "tests/cluster/local/test_statuses.py",
            "tests/cluster/local/test_statuses_cache.py",
            "tests/cluster/local/test_status_changes.py",
        ),
    ),
    "local-dag": Module(
        "cluster",
        "cluster",
        ("cluster/local/dag.py",),
        ("tests/cluster/local/test_rules.py", "tests/cluster/local/test_dag.py"),
    ),
    # not scored here: the modules split off those above, and the controller's other steps
    "ledger-split": Module(
        "harness/src/simrun_harness",
        "simrun_harness",
        ("simrun_harness/ledger_creation.py", "simrun_harness/ledger_reads.py"),
        LEDGER_TESTS,
    ),
    "reconcile-split": Module(
        "runs",
        "runs",
        ("runs/controller/followed.py", "runs/controller/store_facts.py"),
        CONTROLLER_TESTS,
    ),
    "records": Module("runs", "runs", ("runs/controller/records.py",), CONTROLLER_TESTS),
    "seen": Module("runs", "runs", ("runs/controller/seen.py",), CONTROLLER_TESTS),
    "tick": Module("runs", "runs", ("runs/controller/tick.py",), CONTROLLER_TESTS),
    "backoff": Module("runs", "runs", ("runs/controller/backoff.py",), CONTROLLER_TESTS),
}


def toml_list(values: list[str] | tuple[str, ...]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


def stage(name: str, module: Module) -> Path:
    """A fresh stage for one module: its package, the tests and the mutmut configuration."""
    where = WORK / name
    if where.exists():
        shutil.rmtree(where)
    where.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / module.package, where / module.staged_as, ignore=ignore)
    shutil.copytree(ROOT / "tests", where / "tests", ignore=ignore)
    for data in ALSO_COPIED:  # files the tests read by their path in the work tree
        shutil.copytree(ROOT / data, where / data, ignore=ignore)
    config = (ROOT / "pyproject.toml").read_text()
    config += (
        "\n[tool.mutmut]\n"
        f"source_paths = {toml_list([module.staged_as])}\n"
        f"only_mutate = {toml_list(module.paths)}\n"
        f"pytest_add_cli_args_test_selection = {toml_list(module.tests)}\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "--reuse-db", '
        '"-o", "django_find_project=false"]\n'
        "use_git_change_detection = false\n"
        f"also_copy = {toml_list(ALSO_COPIED)}\n"
        # mutants forked from a server of their own, not from the process that ran the tests
        # once for their coverage: that one may have children left (a local backend's pods),
        # whose end mutmut's `os.wait()` would take for a mutant's and then stop at
        'process_isolation = "forkserver"\n'
    )
    (where / "pyproject.toml").write_text(config)
    return where


def environment() -> dict[str, str]:
    """The test environment `deploy/local/dev.sh test` sets, on a database of our own."""
    env = dict(os.environ)
    env["DATABASE_URL"] = env.get(
        "SIMRUN_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/h20m"
    )
    env.setdefault("SIMRUN_TEST_REDIS_URL", "redis://127.0.0.1:6379/6")
    env.setdefault("CELERY_BROKER_URL", env["SIMRUN_TEST_REDIS_URL"])
    env["SIMRUN_CELERY_QUEUE"] = f"simrun-mutation-{os.getpid()}"
    return env


def run_module(
    name: str,
    module: Module,
    *,
    children: int,
    diffs: bool,
    only: list[str] | None = None,
    stop_after_s: float | None = None,
) -> dict[str, int]:
    """Mutate one module and run its tests against every mutant not yet checked (or only
    those named, by name or glob, again); its counts by outcome. The results an unfinished
    run kept (`tools/mutation_parts/<name>/`) are taken up first; a run that leaves some
    mutants not checked (stopped after `stop_after_s`, or of some only) keeps its own there."""
    where = stage(name, module)
    seeded = seed_parts(name, module, where)
    if seeded:
        print(f"{name}: taking up the results kept of {seeded} mutants", flush=True)
    mutmut = str(Path(sys.executable).with_name("mutmut"))
    if not Path(mutmut).exists():
        sys.exit(f"no mutmut beside {sys.executable}: make .venv-mutation (docs/testing.md)")
    env = environment()
    running = subprocess.Popen(
        [mutmut, "run", "--max-children", str(children), *(only or [])],
        cwd=where,
        env=env,
        start_new_session=True,  # its forkserver and children: one group to stop
    )
    try:
        running.wait(timeout=stop_after_s)
    except subprocess.TimeoutExpired:
        stop_group(running)
    keep_parts(name, module, where)
    taken_up = {"taken_up": seeded} if seeded else {}
    subprocess.run([mutmut, "export-cicd-stats"], cwd=where, env=env, check=True)
    stats = json.loads((where / "mutants" / "mutmut-cicd-stats.json").read_text())
    stats["not_checked"] = sum(
        code is None
        for path in module.paths
        if meta_of(where, path).exists()
        for code in json.loads(meta_of(where, path).read_text())["exit_code_by_key"].values()
    )
    stats.update(taken_up)  # outcomes of an earlier, stopped run of the same functions
    survivors = subprocess.run(
        [mutmut, "results"], cwd=where, env=env, capture_output=True, text=True, check=True
    ).stdout
    functions: dict[str, dict[str, str]] = {}  # a mutated file's functions, parsed once
    shown = []
    for line in survivors.splitlines():
        mutant, _, outcome = line.strip().partition(": ")
        if not mutant or outcome == "not checked":
            continue
        if diffs:
            path = mutant_path(mutant)
            if path not in functions:
                functions[path] = function_sources((where / "mutants" / path).read_text())
            shown.append(f"{mutant}: {outcome}\n{mutant_diff(functions[path], mutant)}")
        else:
            shown.append(line.strip())
    (where / "survivors.txt").write_text("\n".join(shown) + "\n" if shown else "")
    return stats


def stop_group(running: subprocess.Popen[bytes]) -> None:
    """End a mutmut run and every process it started; the results of the mutants it
    finished are in its meta files already (mutmut writes one at each result)."""
    for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(running.pid, sig)
        try:
            running.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def meta_of(where: Path, path: str) -> Path:
    """The file in which mutmut keeps the results of one mutated file of a stage."""
    return where / "mutants" / f"{path}.meta"


def seed_parts(name: str, module: Module, where: Path) -> int:
    """Put the results kept of an earlier run into a fresh stage, before mutmut runs: it
    keeps the outcome of every mutant of a function whose code has not changed since (by
    its hash of the function) and runs the others. How many outcomes were put."""
    seeded = 0
    for path in module.paths:
        kept = PARTS / name / f"{path}.meta"
        if not kept.exists():
            continue
        target = meta_of(where, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(kept, target)
        outcomes = json.loads(kept.read_text())["exit_code_by_key"].values()
        seeded += sum(code is not None for code in outcomes)
    return seeded


def keep_parts(name: str, module: Module, where: Path) -> None:
    """Keep the results of a run that checked some mutants but not all, for the next run
    (on this machine or another: the files go into the repository); a run that checked
    every one leaves nothing kept, its score says it all."""
    metas = {path: meta_of(where, path) for path in module.paths}
    results = [json.loads(m.read_text()) for m in metas.values() if m.exists()]
    unchecked = sum(
        code is None for result in results for code in result["exit_code_by_key"].values()
    )
    folder = PARTS / name
    if results and not unchecked:
        shutil.rmtree(folder, ignore_errors=True)
        return
    for path, meta in metas.items():
        if meta.exists():
            kept = folder / f"{path}.meta"
            kept.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(meta, kept)


def mutant_path(mutant: str) -> str:
    """The staged file of a mutant, from its name: `runs.controller.rules.x_f__mutmut_3` and
    `simrun_harness.ledger.xǁLedgerǁclaim__mutmut_12` name their module before the function."""
    parts = mutant.split(".")
    at = next(i for i, part in enumerate(parts) if part.startswith(("x_", "xǁ")))
    return "/".join(parts[:at]) + ".py"


def score_of(name: str, module: Module, stats: dict[str, int]) -> dict[str, object]:
    """What a run of one module measured: its counts, the score line, when, on which commit,
    and the digest of each file it mutated (what `--record` keeps)."""
    killed, total = stats.get("killed", 0), stats.get("total", 0)
    percent = 100 * killed / total if total else 0.0
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    changed = subprocess.run(
        ["git", "status", "--porcelain", "--", *module.digests()],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return {
        "line": f"{name}: {killed}/{total} killed ({percent:.1f} %)",
        "killed": killed,
        "total": total,
        "stats": stats,
        "commit": commit + ("+changes" if changed else ""),
        "date": datetime.now(UTC).date().isoformat(),
        "digests": module.digests(),
        "tests": list(module.tests),
    } | ({"taken_up": stats["taken_up"]} if stats.get("taken_up") else {})


def record(name: str, score: dict[str, object]) -> None:
    """Keep a module's score in tools/mutation_scores.json (modules in name order)."""
    scores = json.loads(SCORES.read_text()) if SCORES.exists() else {}
    scores[name] = {k: v for k, v in score.items() if k != "stats"}
    SCORES.write_text(json.dumps(dict(sorted(scores.items())), indent=2, ensure_ascii=False) + "\n")


def function_sources(mutated: str) -> dict[str, str]:
    """Each function of a mutated module by its name (mutmut keeps each mutant as a copy of
    the function beside the original); parsed once a file, not once a survivor."""
    lines = mutated.splitlines(keepends=True)
    return {
        node.name: "".join(lines[node.lineno - 1 : node.end_lineno])
        for node in ast.walk(ast.parse(mutated))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def mutant_diff(sources: dict[str, str], mutant: str) -> str:
    """The lines one mutant changes in its function, from its module's functions: what
    `mutmut show` gives, without its second or two per mutant."""
    function, _, number = mutant.rpartition(".")[2].rpartition("__mutmut_")
    original = sources.get(f"{function}__mutmut_orig", "").replace(
        f"{function}__mutmut_orig", function
    )
    changed = sources.get(f"{function}__mutmut_{number}", "").replace(
        f"{function}__mutmut_{number}", function
    )
    lines = difflib.unified_diff(original.splitlines(), changed.splitlines(), lineterm="", n=0)
    return "\n".join(line for line in lines if not line.startswith(("---", "+++", "@@")))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "modules", nargs="*", help=f"of {', '.join(MODULES)}; default the scored ones"
    )
    parser.add_argument("--list", action="store_true", help="list the modules and their tests")
    parser.add_argument("--children", type=int, default=1, help="mutants run at once")
    parser.add_argument("--diffs", action="store_true", help="write each survivor's diff")
    parser.add_argument(
        "--record",
        action="store_true",
        help="keep each module's score and digests in tools/mutation_scores.json",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        metavar="MUTANT",
        help="run only these mutants (names or globs as survivors.txt gives them), e.g. the "
        "survivors of the last run once tests were added: with the outcomes of the others "
        "kept (tools/mutation_parts/), the score is whole and --record keeps it",
    )
    parser.add_argument(
        "--stop-after",
        type=float,
        metavar="MINUTES",
        help="stop after this long and keep the results so far for the next run",
    )
    args = parser.parse_args()
    if args.list:
        for name, module in MODULES.items():
            print(f"{name}: {' '.join(module.paths)} <- {' '.join(module.tests)}")
        return 0
    unknown = [m for m in args.modules if m not in MODULES]
    if unknown:
        parser.error(f"unknown module(s) {', '.join(unknown)}; known: {', '.join(MODULES)}")
    for name in args.modules or list(SCORED):
        module = MODULES[name]
        stats = run_module(
            name,
            module,
            children=args.children,
            diffs=args.diffs,
            only=args.only,
            stop_after_s=args.stop_after * 60 if args.stop_after else None,
        )
        if stats["not_checked"]:
            print(
                f"{name}: stopped with {stats['not_checked']} of {stats['total']} mutants not "
                f"checked; the results of the others are kept in {PARTS.relative_to(ROOT)}/"
                f"{name}/ for the next run {json.dumps(stats)}",
                flush=True,
            )
            continue
        score = score_of(name, module, stats)
        (WORK / name / "score.json").write_text(json.dumps(score, indent=2) + "\n")
        if args.record:
            record(name, score)
        print(f"{score['line']} {json.dumps(stats)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
