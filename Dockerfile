# calltap beside a gateway: clients call :8700, the gateway's provider base URL points at :8701,
# health and metrics on :8702. Recordings live in the /recordings volume, captures waiting for a
# bucket in the /spool volume; nothing else is written, so the container runs with --read-only.
# `make image` builds it (docs/image.md). Behind a TLS-intercepting proxy, hand the proxy's CA
# bundle to the build as the secret `ca` (`--secret id=ca,src=/etc/ssl/certs/ca-certificates.crt`,
# which `make image` does when PIP_CERT or SSL_CERT_FILE names one): pip trusts it during the
# build and it never reaches a layer.
#
# Every stage starts from `base`, so one override of the first FROM (podman build --from IMAGE)
# changes them all; any image with python3 >= 3.11 and its venv module will do.
FROM python:3.11-slim AS base

# calltap and its dependencies in a venv of their own: the same on python:3.11-slim and on a
# distribution's python3 whose system pip refuses to install (PEP 668). pip and setuptools leave
# the venv once done (a quarter of its size, never used at run time).
FROM base AS build
WORKDIR /build
COPY pyproject.toml README.md ./
COPY src ./src
RUN --mount=type=secret,id=ca \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi \
    && python3 -m venv /opt/calltap \
    && /opt/calltap/bin/python -m pip install --no-cache-dir --disable-pip-version-check '.[fast]' \
    && /opt/calltap/bin/python -m pip uninstall --yes --quiet pip setuptools

FROM base
# TMPDIR: the comparator's worker processes start from a forkserver whose socket lives in a
# temporary directory. /dev/shm is the one tmpfs every runtime gives a container (multiprocessing
# needs it for its semaphores anyway), so a root filesystem mounted read-only without a writable
# /tmp (Kubernetes' readOnlyRootFilesystem, podman --read-only --read-only-tmpfs=false) still works.
# XDG_CACHE_HOME: the view's index and, with a bucket, its local copy of the bucket (which serve
# creates at start) live in the user's cache directory; the user has no home, so they go to the
# recordings volume, which holds no capture when a bucket is used, and whose readers skip them.
ENV PATH=/opt/calltap/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    TMPDIR=/dev/shm \
    XDG_CACHE_HOME=/recordings/.cache \
    CALLTAP_RECORDINGS=/recordings \
    CALLTAP_SPOOL=/spool \
    CALLTAP_FRONT=0.0.0.0:8700 \
    CALLTAP_BACK=0.0.0.0:8701 \
    CALLTAP_ADMIN=0.0.0.0:8702 \
    CALLTAP_ALLOW_REMOTE=true

COPY --from=build /opt/calltap /opt/calltap
COPY config /app/config
# A numeric USER, so an orchestrator can check it is not root (Kubernetes' runAsNonRoot).
RUN groupadd --gid 10001 calltap \
    && useradd --no-log-init --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin calltap \
    && mkdir -p /recordings /spool \
    && chown 10001:10001 /recordings /spool \
    && chmod 0700 /recordings /spool

WORKDIR /app
USER 10001:10001
VOLUME ["/recordings", "/spool"]
EXPOSE 8700 8701 8702
# The admin port is read from CALLTAP_ADMIN, so moving it (-e CALLTAP_ADMIN=...) keeps the check.
HEALTHCHECK --interval=15s --timeout=3s \
    CMD python -c "import os, urllib.request; port = os.environ.get('CALLTAP_ADMIN', ':8702').rpartition(':')[2]; urllib.request.urlopen(f'http://127.0.0.1:{port}/healthz', timeout=2)"

ENTRYPOINT ["calltap", "serve"]
CMD ["--config", "/app/config/calltap.toml"]
