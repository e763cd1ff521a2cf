"""One machinery for every event stream, low-level and subscription alike.

- ``limits``: the stream parameters (``batch_limit``, timeouts, limits).
- ``batcher``: per-partition buffers, flush and keep-alive timers, ``stream_limit``.
- ``lines``: the ``application/x-json-stream`` line of one batch.
- ``connection``: noticing a client that left.
- ``response``: the HTTP response of a stream (headers at once, gzip, the
  connection closed when the stream ends).
- ``event_stream``: the low-level stream of one event type.
"""
