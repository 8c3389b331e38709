# calltap beside a gateway: clients call :8700, the gateway's provider base URL points at :8701,
# health and metrics on :8702. Recordings live in the /recordings volume.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    CALLTAP_RECORDINGS=/recordings \
    CALLTAP_FRONT=0.0.0.0:8700 \
    CALLTAP_BACK=0.0.0.0:8701 \
    CALLTAP_ADMIN=0.0.0.0:8702 \
    CALLTAP_ALLOW_REMOTE=true

WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
COPY config ./config
RUN pip install '.[fast]' \
    && useradd --system --uid 10001 --home-dir /app calltap \
    && mkdir -p /recordings \
    && chown calltap /recordings \
    && chmod 0700 /recordings

USER calltap
VOLUME ["/recordings"]
EXPOSE 8700 8701 8702
HEALTHCHECK --interval=15s --timeout=3s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8702/healthz', timeout=2)"

ENTRYPOINT ["calltap", "serve"]
CMD ["--config", "/app/config/calltap.toml"]
