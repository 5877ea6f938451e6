"""simrun's settings: every value comes from an environment variable (see docs/configuration.md).

With no variable set at all this is the embedded default: SQLite and a file-system Celery
broker under `SIMRUN_DATA_DIR` (the nearest .simrun/ above the current directory, else
./.simrun), the run store below it, the local backend.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from runs.disk_space import DEFAULT_MIN_FREE_MB
from simrun_site import env, installation
from simrun_site.private_files import private_file, private_folder, private_sqlite

BASE_DIR = Path(__file__).resolve().parent.parent

DATA_DIR = env.path("SIMRUN_DATA_DIR", installation.default_data_dir(Path.cwd()))
try:
    private_folder(DATA_DIR)  # secret key, SQLite, broker: the service's user's only
except OSError as exc:
    raise ImproperlyConfigured(
        f"SIMRUN_DATA_DIR={str(DATA_DIR)!r}: cannot create it or make it private: {exc}"
    ) from exc


def _secret_key() -> str:
    """The configured key, else one generated once and kept in the data directory."""
    configured = env.raw("SIMRUN_SECRET_KEY")
    if configured:
        return configured
    file = DATA_DIR / "secret_key"
    if not file.exists() or not file.stat().st_size:
        private_file(file).write_text(secrets.token_urlsafe(50))
    return private_file(file).read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env.boolean("SIMRUN_DEBUG", False)
ALLOWED_HOSTS = env.strings(
    "SIMRUN_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"]
)
CSRF_TRUSTED_ORIGINS = env.strings("SIMRUN_CSRF_TRUSTED_ORIGINS", [])

# HTTPS only: TLS ends at the proxy in front of the web process (an ingress, nginx), which
# says so in X-Forwarded-Proto (and must set it itself, never pass a client's on). Then plain
# HTTP is redirected (the liveness probe aside), cookies are sent over HTTPS only and browsers
# are told to use nothing else (HSTS). docs/security.md.
SIMRUN_HTTPS = env.boolean("SIMRUN_HTTPS", False)
if SIMRUN_HTTPS:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = env.integer("SIMRUN_HSTS_SECONDS", 31_536_000, minimum=0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "django_htmx",
    "runs",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "runs.api.django_errors.ApiErrorsMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "simrun_site.urls"
WSGI_APPLICATION = "simrun_site.wsgi.application"
ASGI_APPLICATION = "simrun_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# The web process serves requests on SIMRUN_WEB_THREADS threads (simrun_site/dispatch.py),
# reads for its event loop (credentials, streams' polls) on SIMRUN_WEB_READERS more
# (runs/edge/readers.py), and its ASGI entry point sets SIMRUN_DB_POOL (see env.database);
# other processes persist.
SIMRUN_WEB_THREADS = env.integer("SIMRUN_WEB_THREADS", 10, minimum=1)
SIMRUN_WEB_READERS = env.integer("SIMRUN_WEB_READERS", 2, minimum=1)


def default_database() -> dict[str, object]:
    """The default database's settings as this process's variables give them (the web
    process's pool when SIMRUN_DB_POOL is set; a forked web process reads them again)."""
    return env.database(
        "DATABASE_URL",
        DATA_DIR / "simrun.sqlite3",
        pool_size=env.integer(
            "SIMRUN_DB_POOL_SIZE", SIMRUN_WEB_THREADS + SIMRUN_WEB_READERS, minimum=1
        )
        if env.boolean("SIMRUN_DB_POOL", False)
        else 0,
    )


DATABASES = {"default": default_database()}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    private_sqlite(Path(str(DATABASES["default"]["NAME"])))  # holds password and token hashes
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/login/"
# a one-time login link (`simrun login`, printed by serve and demo --keep) is valid this long
SIMRUN_LOGIN_LINK_S = env.integer("SIMRUN_LOGIN_LINK_S", 600, minimum=10)
LOGIN_REDIRECT_URL = "/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = env.path("SIMRUN_STATIC_ROOT", DATA_DIR / "static")
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns about a missing one
STATICFILES_DIRS: list[Path] = []
# WhiteNoise serves the apps' static files straight from their folders, so the embedded
# default needs no collectstatic; a deployment may still collect them into STATIC_ROOT.
WHITENOISE_USE_FINDERS = True

# --- Celery: Redis in production, a file-system broker under the data dir by default -------
CELERY_BROKER_URL = env.string("CELERY_BROKER_URL", "filesystem://localhost/")
if CELERY_BROKER_URL.startswith("filesystem://"):
    _queue = private_folder(DATA_DIR / "broker")
    for _sub in ("in", "processed", "control", "staging", "claimed", "bad", "doorbell"):
        private_folder(_queue / _sub)
    # kombu's transport with atomic publishing and unreadable messages set aside in bad/
    # (simrun_site/file_broker.py; celery/kombu#1551 took the worker down)
    CELERY_BROKER_TRANSPORT = "simrun_site.file_broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {
        "data_folder_in": str(_queue / "in"),
        "data_folder_out": str(_queue / "in"),
        "data_folder_processed": str(_queue / "processed"),
        "store_processed": False,
        "control_folder": str(_queue / "control"),
        "staging_folder": str(_queue / "staging"),
        "claimed_folder": str(_queue / "claimed"),
        "bad_folder": str(_queue / "bad"),
        # an idle worker waits on a doorbell of its own there, which every publisher rings,
        # and looks at the queue folder anyway every doorbell_fallback_s
        "doorbell_folder": str(_queue / "doorbell"),
        "doorbell_fallback_s": 2.0,
        # how often a worker looks for a task when it has no doorbell, or when its threads
        # are all busy (an ack rings nobody): kombu's 1 s would delay the next task
        "polling_interval": 0.1,
    }
    # Threads, not the prefork pool: on a broker without an event loop (this one polls)
    # Celery's prefork pool is billiard's blocking pool, whose processes share one queue and
    # its lock, and a pool process killed while holding it froze the others for good
    # (celery/celery#2011). Threads of the worker's one process have no lock a kill can
    # orphan; a kill takes the whole worker, which serve starts again.
    CELERY_WORKER_POOL = "threads"
elif not CELERY_BROKER_URL.startswith(("redis://", "rediss://", "memory://")):
    raise ImproperlyConfigured(
        f"CELERY_BROKER_URL={CELERY_BROKER_URL!r}: use redis://, rediss:// or filesystem://"
    )
else:
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_TASK_DEFAULT_QUEUE = env.string("SIMRUN_CELERY_QUEUE", "simrun")
CELERY_TASK_ALWAYS_EAGER = env.boolean("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")
# beat touches its liveness stamp at each tick (simrun_site/beat.py), and ticks at least
# this often even when no task is due, so `simrun serve` sees it alive
CELERY_BEAT_SCHEDULER = "simrun_site.beat:StampingScheduler"

# --- simrun ---------------------------------------------------------------------------------
SIMRUN_STORE = env.path("SIMRUN_STORE", DATA_DIR / "store")
# what the views read of a run's files, saved for the next process (never in a run's files)
SIMRUN_VIEW_CACHE = env.path("SIMRUN_VIEW_CACHE", DATA_DIR / "cache" / "views")
SIMRUN_BACKEND = env.choice("SIMRUN_BACKEND", "local", ("local", "argo"))
SIMRUN_POLL_S = env.number("SIMRUN_POLL_S", 2.0, minimum=0.05)
# The controller reads the rows written since its last read, this much before it (a write
# stamped before the read that commits after it), and every followed row this often.
SIMRUN_TICK_LAG_S = env.number("SIMRUN_TICK_LAG_S", 10.0, minimum=0)
# With no run to follow the watcher waits for the backend's ring this long at most; beat's
# reconcile is the backstop of the watcher (which serve and the cluster both run).
SIMRUN_IDLE_POLL_S = env.number("SIMRUN_IDLE_POLL_S", 60.0, minimum=0.05)
SIMRUN_BEAT_POLL_S = env.number("SIMRUN_BEAT_POLL_S", 30.0, minimum=0.05)
SIMRUN_TICK_RESYNC_S = env.number("SIMRUN_TICK_RESYNC_S", 300.0, minimum=1)
SIMRUN_SUBMIT_LEASE_S = env.number("SIMRUN_SUBMIT_LEASE_S", 30.0, minimum=1)
# fair share between identities (runs/services/fair_share.py): runs in submission and
# submissions a minute per identity (429 beyond)
SIMRUN_SUBMIT_MAX_PENDING = env.integer("SIMRUN_SUBMIT_MAX_PENDING", 20, minimum=1)
SIMRUN_SUBMITS_PER_MINUTE = env.integer("SIMRUN_SUBMITS_PER_MINUTE", 60, minimum=1)
# environment builds one identity's submissions make at a time (runs/services/builds.py)
SIMRUN_BUILDS_PER_IDENTITY = env.integer("SIMRUN_BUILDS_PER_IDENTITY", 1, minimum=1)
SIMRUN_GRACE_S = env.integer("SIMRUN_GRACE_S", 30, minimum=1)
SIMRUN_MERGE_MARKER_GRACE_S = env.number("SIMRUN_MERGE_MARKER_GRACE_S", 120.0, minimum=0)
SIMRUN_EVENTS_POLL_S = env.number("SIMRUN_EVENTS_POLL_S", 1.0, minimum=0.05)
SIMRUN_EVENTS_MAX_S = env.number("SIMRUN_EVENTS_MAX_S", 300.0, minimum=1)
# open event and log streams per identity in a web process (429 beyond; runs/edge/streams.py)
SIMRUN_STREAMS_PER_IDENTITY = env.integer("SIMRUN_STREAMS_PER_IDENTITY", 20, minimum=1)
# the servers page's stream asks the backend (on a cluster, the API server) at each poll
SIMRUN_SERVERS_POLL_S = env.number("SIMRUN_SERVERS_POLL_S", 5.0, minimum=0.05)
# Clients (runs/edge/bodies.py, simrun_site/web_protocol.py): a request's head and body arrive
# within their deadlines and a body within its limit before a request thread is taken; the
# connections the web process holds at most (beyond: 503)
SIMRUN_HEADER_TIMEOUT_S = env.number("SIMRUN_HEADER_TIMEOUT_S", 10.0, minimum=0.1)
SIMRUN_BODY_TIMEOUT_S = env.number("SIMRUN_BODY_TIMEOUT_S", 5.0, minimum=0.1)
# a download's client that takes no chunk of it for this long is cut (runs/edge/downloads.py)
SIMRUN_SEND_TIMEOUT_S = env.number("SIMRUN_SEND_TIMEOUT_S", 60.0, minimum=0.1)
# an upload's body keeps this rate on average once SIMRUN_BODY_TIMEOUT_S has passed
SIMRUN_UPLOAD_MIN_BYTES_PER_S = env.integer(
    "SIMRUN_UPLOAD_MIN_BYTES_PER_S", 64 * 1024, minimum=1024
)
SIMRUN_FORM_MAX_BYTES = env.integer("SIMRUN_FORM_MAX_BYTES", 4 * 1024 * 1024, minimum=1024)
SIMRUN_ANONYMOUS_MAX_BYTES = env.integer("SIMRUN_ANONYMOUS_MAX_BYTES", 64 * 1024, minimum=1024)
SIMRUN_WEB_MAX_CONNECTIONS = env.integer("SIMRUN_WEB_MAX_CONNECTIONS", 1000, minimum=10)
# a form's files stay in memory (its body is there already, within SIMRUN_FORM_MAX_BYTES)
FILE_UPLOAD_MAX_MEMORY_SIZE = SIMRUN_FORM_MAX_BYTES
SIMRUN_MAX_UPLOAD_BYTES = env.integer("SIMRUN_MAX_UPLOAD_BYTES", 2 * 1024**3, minimum=1)
SIMRUN_UPLOAD_MAX_FILES = env.integer("SIMRUN_UPLOAD_MAX_FILES", 10_000, minimum=1)
SIMRUN_UPLOAD_MAX_UNPACKED_BYTES = env.integer(
    "SIMRUN_UPLOAD_MAX_UNPACKED_BYTES", 8 * 1024**3, minimum=1
)
# A model's local packages (runs/local_packages.py): the directories besides its snapshot they
# may lie in, and the bytes of one package read (its entries: SIMRUN_UPLOAD_MAX_FILES)
SIMRUN_LOCAL_PACKAGE_ROOTS = env.paths("SIMRUN_LOCAL_PACKAGE_ROOTS", [])
SIMRUN_LOCAL_PACKAGE_MAX_BYTES = env.integer(
    "SIMRUN_LOCAL_PACKAGE_MAX_BYTES", 256 * 1024**2, minimum=1
)
# Listings of a run's files (outputs): entries looked at, directory levels, seconds
SIMRUN_LISTING_MAX_ENTRIES = env.integer("SIMRUN_LISTING_MAX_ENTRIES", 100_000, minimum=1)
SIMRUN_LISTING_MAX_DEPTH = env.integer("SIMRUN_LISTING_MAX_DEPTH", 32, minimum=1)
SIMRUN_LISTING_MAX_S = env.number("SIMRUN_LISTING_MAX_S", 0.5, minimum=0.01)
# The listing of a run's files for its crate (runs/selectors/crates.py): every file or none
SIMRUN_EXPORT_MAX_ENTRIES = env.integer("SIMRUN_EXPORT_MAX_ENTRIES", 2_000_000, minimum=1)
SIMRUN_EXPORT_MAX_DEPTH = env.integer("SIMRUN_EXPORT_MAX_DEPTH", 64, minimum=1)
SIMRUN_EXPORT_MAX_S = env.number("SIMRUN_EXPORT_MAX_S", 600.0, minimum=0.01)
# Answers over a run's files: a task's logs in all (runs/selectors/logs.py), each a share of
# it from their ends; the seconds a comparison hashes runs' outputs for (compare.py)
SIMRUN_LOG_ANSWER_MAX_BYTES = env.integer(
    "SIMRUN_LOG_ANSWER_MAX_BYTES", 4 * 1024 * 1024, minimum=64 * 1024
)
SIMRUN_COMPARE_MAX_S = env.number("SIMRUN_COMPARE_MAX_S", 2.0, minimum=0.01)
# Workflow documents (runs/workflow_text.py): size, nesting, values after aliases, a string
SIMRUN_WORKFLOW_MAX_BYTES = env.integer("SIMRUN_WORKFLOW_MAX_BYTES", 1024 * 1024, minimum=1)
SIMRUN_WORKFLOW_MAX_DEPTH = env.integer("SIMRUN_WORKFLOW_MAX_DEPTH", 64, minimum=4)
SIMRUN_WORKFLOW_MAX_NODES = env.integer("SIMRUN_WORKFLOW_MAX_NODES", 20_000, minimum=10)
SIMRUN_WORKFLOW_MAX_STRING = env.integer("SIMRUN_WORKFLOW_MAX_STRING", 65_536, minimum=64)
# a split task's units: more is a 400 naming the task (listing and keying stream them, so a
# task of this many costs the Celery worker a bounded amount of memory)
SIMRUN_MAX_UNITS_PER_TASK = env.integer("SIMRUN_MAX_UNITS_PER_TASK", 1_000_000, minimum=1)
# plugin hosts (runs/plugin_host.py): processes in a model's environment that answer for its
# task types, so no service process imports a plugin
SIMRUN_PLUGIN_HOST_TIMEOUT_S = env.number("SIMRUN_PLUGIN_HOST_TIMEOUT_S", 30.0, minimum=0.1)
SIMRUN_PLUGIN_HOST_MEMORY_MB = env.integer("SIMRUN_PLUGIN_HOST_MEMORY_MB", 2048, minimum=64)
SIMRUN_PLUGIN_POD_TIMEOUT_S = env.number("SIMRUN_PLUGIN_POD_TIMEOUT_S", 300.0, minimum=1.0)
SIMRUN_PLUGIN_HOSTS = env.integer("SIMRUN_PLUGIN_HOSTS", 4, minimum=1)
SIMRUN_PLUGIN_HOST_IDLE_S = env.number("SIMRUN_PLUGIN_HOST_IDLE_S", 120.0, minimum=1)
SIMRUN_RATE_LIMIT_PER_MINUTE = env.integer("SIMRUN_RATE_LIMIT_PER_MINUTE", 600, minimum=1)
SIMRUN_API_MAX_JSON_DEPTH = env.integer("SIMRUN_API_MAX_JSON_DEPTH", 64, minimum=2)
# who may submit a `command` task, which runs its arguments as the service's user on this
# machine (the local backend) or in a pod (docs/security.md)
SIMRUN_COMMAND_TIERS = env.choices(
    "SIMRUN_COMMAND_TIERS", ["owner", "person", "agent"], ("owner", "person", "agent")
)
SIMRUN_TOKEN_RECHECK_S = env.number("SIMRUN_TOKEN_RECHECK_S", 2.0, minimum=0)
SIMRUN_REDIS_URL = env.string(
    "SIMRUN_REDIS_URL",
    CELERY_BROKER_URL if CELERY_BROKER_URL.startswith("redis") else "",
)
SIMRUN_LOCAL_CORES = env.number("SIMRUN_LOCAL_CORES", 0.0, minimum=0)
SIMRUN_LOCAL_MEMORY_GB = env.number("SIMRUN_LOCAL_MEMORY_GB", 0.0, minimum=0)
# standby pod processes, started and imported ahead: how many of the most recently used
# environments keep one (0: none; every pod starts fresh) (docs/local-backend.md)
SIMRUN_LOCAL_STANDBY = env.integer("SIMRUN_LOCAL_STANDBY", 2, minimum=0)
SIMRUN_LOCAL_STANDBY_IDLE_S = env.number("SIMRUN_LOCAL_STANDBY_IDLE_S", 300.0, minimum=0)
SIMRUN_PYTHON = env.string("SIMRUN_PYTHON", "3.13")
# `simrun serve` gives up on a service that exits more than BURST times within WINDOW seconds
SIMRUN_RESTART_BURST = env.integer("SIMRUN_RESTART_BURST", 5, minimum=0)
SIMRUN_RESTART_WINDOW_S = env.number("SIMRUN_RESTART_WINDOW_S", 60.0, minimum=1)
# ... and restarts one that shows no sign of progress for this long (docs/local-backend.md)
SIMRUN_LIVENESS_S = env.number("SIMRUN_LIVENESS_S", 120.0, minimum=2)
CELERY_BEAT_MAX_LOOP_INTERVAL = max(1.0, SIMRUN_LIVENESS_S / 8)
# ... and forks its services from one process that imported what they share (runs/cli/
# service_parent.py: an idle service's memory), else starts each by its command line
SIMRUN_FORK_SERVICES = env.boolean("SIMRUN_FORK_SERVICES", True)
# simrun counts a disk it writes to as full below this much free space (runs/selectors/disk.py)
SIMRUN_DISK_MIN_FREE_MB = env.number("SIMRUN_DISK_MIN_FREE_MB", DEFAULT_MIN_FREE_MB, minimum=0)
# `simrun serve` keeps each service's log in logs/<name>.log, rotated at this size, keeping
# this many earlier ones (<name>.log.1 is the newest)
SIMRUN_LOG_MAX_BYTES = env.integer("SIMRUN_LOG_MAX_BYTES", 10 * 1024 * 1024, minimum=1024)
SIMRUN_LOG_BACKUPS = env.integer("SIMRUN_LOG_BACKUPS", 3, minimum=0)

# --- The Argo backend (SIMRUN_BACKEND=argo): the cluster it runs on (docs/argo-backend.md) ---
SIMRUN_KUBECONFIG = env.string("SIMRUN_KUBECONFIG", "")  # empty: the pod's service account
SIMRUN_NAMESPACE = env.string("SIMRUN_NAMESPACE", "simrun")
SIMRUN_QUEUE = env.string("SIMRUN_QUEUE", "simrun")
SIMRUN_STORE_CLAIM = env.string("SIMRUN_STORE_CLAIM", "simrun-store")
SIMRUN_POD_STORE = env.string("SIMRUN_POD_STORE", "/mnt/simrun-store")
SIMRUN_SCRATCH_PATH = env.string("SIMRUN_SCRATCH_PATH", "/scratch")
SIMRUN_WORKFLOW_SERVICE_ACCOUNT = env.string("SIMRUN_WORKFLOW_SERVICE_ACCOUNT", "simrun-workflow")
SIMRUN_WORKFLOW_TTL_S = env.integer("SIMRUN_WORKFLOW_TTL_S", 86400, minimum=0)
SIMRUN_REGISTRY = env.string("SIMRUN_REGISTRY", "registry.cluster.internal:5000")
SIMRUN_REGISTRY_URL = env.string("SIMRUN_REGISTRY_URL", "")  # empty: http://SIMRUN_REGISTRY
SIMRUN_DEFAULT_IMAGE = env.string("SIMRUN_DEFAULT_IMAGE", "")
SIMRUN_BUILD_BASE_IMAGE = env.string("SIMRUN_BUILD_BASE_IMAGE", "")  # empty: the default image
SIMRUN_BUILDKIT_ADDR = env.string("SIMRUN_BUILDKIT_ADDR", "tcp://buildkitd:1234")
SIMRUN_BUILDCTL_IMAGE = env.string("SIMRUN_BUILDCTL_IMAGE", "moby/buildkit:v0.29.0")
SIMRUN_BUILD_TIMEOUT_S = env.number("SIMRUN_BUILD_TIMEOUT_S", 1800.0, minimum=1)
SIMRUN_EXECUTOR_CORES = env.number("SIMRUN_EXECUTOR_CORES", 0.1, minimum=0)
SIMRUN_EXECUTOR_MEMORY_GB = env.number("SIMRUN_EXECUTOR_MEMORY_GB", 0.25, minimum=0)
SIMRUN_WATCH_TIMEOUT_S = env.integer("SIMRUN_WATCH_TIMEOUT_S", 60, minimum=1)
# a large workflow's node status: compressed (bounded), or offloaded and read through Argo's server
SIMRUN_ARGO_NODES_LIMIT_MB = env.integer("SIMRUN_ARGO_NODES_LIMIT_MB", 64, minimum=1)
SIMRUN_ARGO_SERVER_URL = env.string("SIMRUN_ARGO_SERVER_URL", "")  # empty: none
SIMRUN_ARGO_SERVER_TOKEN_FILE = env.string("SIMRUN_ARGO_SERVER_TOKEN_FILE", "")  # empty: the pod's
SIMRUN_ARGO_SERVER_CA_FILE = env.string("SIMRUN_ARGO_SERVER_CA_FILE", "")  # empty: system CAs
SIMRUN_ARGO_SERVER_INSECURE = env.boolean("SIMRUN_ARGO_SERVER_INSECURE", False)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["runs.api.auth.BearerTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # JSON bodies only, bounded in size and depth (runs/api/parsers.py); uploads read their own
    "DEFAULT_PARSER_CLASSES": ["runs.api.parsers.BoundedJSONParser"],
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    "UNAUTHENTICATED_USER": None,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "simrun API",
    "DESCRIPTION": "Submit, follow and compare simulation runs.",
    "VERSION": "0.4.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "runs.api.schema.no_nul_in_requests",
    ],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.string("SIMRUN_LOG_LEVEL", "INFO")},
}

CELERY_BEAT_SCHEDULE = {
    "reconcile": {"task": "runs.tasks.reconcile", "schedule": SIMRUN_BEAT_POLL_S},
}
# beat writes its schedule after every message it sends (Celery's default: every 3 minutes):
# one small write a poll, and a disk that can no longer take it stops beat at its next send,
# which serve then names and waits out, rather than whenever three minutes are up
CELERY_BEAT_SYNC_EVERY = 1
