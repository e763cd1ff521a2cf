# The broker alone: PostgreSQL, ZooKeeper and Kafka are external services,
# configured with NAKADI_DATABASE_URL, NAKADI_ZOOKEEPER, NAKADI_KAFKA_BOOTSTRAP_SERVERS.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 NAKADI_BIND=0.0.0.0:8080

RUN useradd --create-home --uid 10001 nakadi
WORKDIR /srv/nakadi

COPY setup.cfg pyproject.toml README.md gunicorn.conf.py ./
COPY app ./app
COPY workers ./workers
COPY sql ./sql
COPY deploy ./deploy
RUN pip install --no-cache-dir . && rm -rf build *.egg-info

USER nakadi
EXPOSE 8080
# gunicorn's master applies migrations, then forks gevent workers.
CMD ["gunicorn", "-c", "gunicorn.conf.py", "app.wsgi:app"]
