# The broker alone: PostgreSQL, ZooKeeper and Kafka are external services, configured
# with NAKADI_DATABASE_URL, NAKADI_ZOOKEEPER and NAKADI_KAFKA_BOOTSTRAP_SERVERS
# (deploy/docker-compose.yml runs all four; deploy/k8s/ has Kubernetes manifests).

# Build stage: the project as a wheel, installed with its dependencies into a venv
# that the final stage copies whole (no pip, no build files in the image).
FROM python:3.11.14-slim-bookworm AS build
WORKDIR /build
COPY setup.cfg pyproject.toml README.md ./
COPY app ./app
COPY workers ./workers
COPY sql ./sql
COPY deploy ./deploy
RUN python -m venv /opt/nakadi \
    && /opt/nakadi/bin/pip install --no-cache-dir .

FROM python:3.11.14-slim-bookworm
# tini is PID 1: it passes SIGTERM to gunicorn's master, which ends open streams
# within NAKADI_GRACEFUL_TIMEOUT, and reaps any orphan.
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini=0.19.0-1+b3 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 nakadi
COPY --from=build /opt/nakadi /opt/nakadi
WORKDIR /srv/nakadi
COPY gunicorn.conf.py ./
ENV PATH=/opt/nakadi/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    NAKADI_BIND=0.0.0.0:8080

USER 10001
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-m", "deploy.healthcheck"]
ENTRYPOINT ["/usr/bin/tini", "--"]
# gunicorn's master applies migrations, then forks gevent workers.
CMD ["gunicorn", "-c", "gunicorn.conf.py", "app.wsgi:app"]
