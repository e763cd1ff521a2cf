"""An outage of a storage names that storage, not the type's default one: with two
kafka storages, the 503 says which of them to look at."""

from __future__ import annotations

import pytest

from app.dependencies import unavailable_from
from app.repository.database import ConnectionPool
from app.repository.storages import Storage
from app.storage.engine import StorageUnavailable
from app.storage.engines import build_engine
from deploy.localstack import free_port


@pytest.mark.parametrize(("storage_type", "dependency"), [("kafka", "Kafka"),
                                                          ("postgres", "PostgreSQL")])
def test_an_outage_names_the_storage_that_is_down(pool: ConnectionPool, storage_type,
                                                  dependency):
    dead = f"127.0.0.1:{free_port()}"
    configuration = ({"bootstrap_servers": dead} if storage_type == "kafka"
                     else {"database_url": f"postgresql://nakadi@{dead}/nakadi"})
    storage = Storage(id="archive-2", storage_type=storage_type, configuration=configuration,
                      is_default=False)
    engine = build_engine(storage, pool, kafka_timeout_s=1.0)
    try:
        with pytest.raises(StorageUnavailable) as raised:
            engine.bounds("orders")
        # Asked again once known down (refused at once on kafka): named the same way.
        with pytest.raises(StorageUnavailable) as again:
            engine.bounds("orders")
        with pytest.raises(StorageUnavailable) as appending:
            engine.append_many("orders", {0: [b"{}"]})
    finally:
        engine.close()
    for error in (raised.value, again.value, appending.value):
        assert error.dependency == f"{dependency} (the archive-2 storage)"
        assert str(unavailable_from(error)).startswith(
            f"{dependency} (the archive-2 storage) is unavailable: ")
