# syntax=docker/dockerfile:1
# picobridge container image. The agent (picobot) is not included: add it in a derived image,
# see docs/operations.md ("Docker").
#
#   docker build -t picobridge .
#   docker run -d --name picobridge -v picobridge:/var/lib/picobridge \
#     -e PICOBRIDGE_TELEGRAM__TOKEN=... picobridge

# --- build: wheels for picobridge and every dependency ------------------------------------
# The base image by its exact Python and Debian release, so a rebuild next month gets the same
# interpreter (raise it on purpose, in both stages; a digest, python:...@sha256:..., pins it
# further).
FROM python:3.11.14-slim-bookworm AS build
WORKDIR /src
# The dependencies first, from pyproject.toml's list at the versions deploy/constraints.txt
# pins: this layer is rebuilt only when one of those two files changes, not on every code
# change.
COPY pyproject.toml deploy/constraints.txt ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > requirements.txt \
    && pip wheel --no-cache-dir --wheel-dir /deps -r requirements.txt -c constraints.txt \
    && cp requirements.txt constraints.txt /deps/
# Then picobridge itself, in a folder of its own.
COPY . .
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /app .

# --- runtime: only the installed wheels, no source tree, no build tools --------------------
FROM python:3.11.14-slim-bookworm

# What changes least comes first, so a change to picobridge's code rebuilds only its own last
# layer: tini, the user, the dependencies, then picobridge.

# tini as PID 1: it reaps the processes the agent leaves behind (a tool's orphans would stay
# zombies under a PID 1 that does not wait for them) and passes SIGTERM on to picobridge.
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini \
    && rm -rf /var/lib/apt/lists/*

# A fixed numeric uid, so Kubernetes' runAsNonRoot can verify it and volume ownership is
# predictable; its home is the state directory, where the agent may keep its own files.
RUN groupadd --system --gid 10001 picobridge \
    && useradd --system --uid 10001 --gid picobridge --home-dir /var/lib/picobridge \
        --shell /usr/sbin/nologin picobridge \
    && install -d -o picobridge -g picobridge -m 0700 /var/lib/picobridge

# Installing from the build stage's wheels only (--no-index) makes the image match what was
# built and tested, and the bind mounts keep the wheel files themselves out of every layer.
# The dependencies' wheels change only with pyproject.toml or the constraints, so this layer
# stays cached across code changes.
RUN --mount=type=bind,from=build,source=/deps,target=/deps \
    pip install --no-cache-dir --no-index --find-links /deps -r /deps/requirements.txt \
        -c /deps/constraints.txt
RUN --mount=type=bind,from=build,source=/app,target=/app \
    pip install --no-cache-dir --no-index --no-deps /app/*.whl

# PICOBRIDGE_HTTP__LISTEN: all interfaces inside the container so a published port works;
# `picobridge health` (the HEALTHCHECK) asks 127.0.0.1. It overrides http.listen from a config
# file, so change the port here (-e) rather than there.
# CREDENTIALS_DIRECTORY: Docker and Compose secrets appear in /run/secrets; settings read
# telegram_token, slack_bot_token, slack_app_token, slack_signing_secret and discord_token from it exactly
# like systemd credentials. Files that are absent are simply not used.
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PICOBRIDGE_STATE_DIR=/var/lib/picobridge \
    PICOBRIDGE_HTTP__LISTEN=0.0.0.0:8787 \
    CREDENTIALS_DIRECTORY=/run/secrets

USER 10001:10001
WORKDIR /var/lib/picobridge
VOLUME /var/lib/picobridge
EXPOSE 8787

# The agent may need up to agent.ready_timeout (30 s) to come up before the first verdict.
HEALTHCHECK --interval=30s --timeout=10s --start-period=60s --retries=3 \
    CMD ["picobridge", "health"]

# `run` shuts down cleanly on SIGTERM; Docker's default 10 s stop timeout is short for a turn
# in flight: use `docker stop -t 60` / `stop_grace_period: 60s`.
ENTRYPOINT ["/usr/bin/tini", "--", "picobridge"]
CMD ["run"]
