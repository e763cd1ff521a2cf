import pytest

from app.config import Settings


def test_defaults_point_at_the_local_stack():
    settings = Settings.from_env({})
    assert settings.database_url == "postgresql://nakadi@127.0.0.1:5433/nakadi"
    assert settings.zookeeper == "127.0.0.1:2181"
    assert settings.kafka_bootstrap_servers == "127.0.0.1:9092"
    assert settings.default_storage == "postgres"


def test_variables_override_and_are_converted():
    settings = Settings.from_env({"NAKADI_DATABASE_POOL_SIZE": "7", "NAKADI_ZOOKEEPER": "zk:1"})
    assert settings.database_pool_size == 7
    assert settings.zookeeper == "zk:1"


def test_a_bad_number_names_the_variable():
    with pytest.raises(ValueError, match="NAKADI_DATABASE_POOL_SIZE='many' is not a valid int"):
        Settings.from_env({"NAKADI_DATABASE_POOL_SIZE": "many"})


def test_the_subscription_partition_maximum_is_configurable():
    assert Settings.from_env({}).max_subscription_partitions == 100
    assert Settings.from_env(
        {"NAKADI_MAX_SUBSCRIPTION_PARTITIONS": "12"}).max_subscription_partitions == 12


def test_booleans_read_as_people_write_them():
    assert Settings.from_env({}).metrics_enabled is True
    assert Settings.from_env({"NAKADI_METRICS_ENABLED": "false"}).metrics_enabled is False
    assert Settings.from_env({"NAKADI_METRICS_ENABLED": " Off "}).metrics_enabled is False
    assert Settings.from_env({"NAKADI_METRICS_ENABLED": "1"}).metrics_enabled is True
    with pytest.raises(ValueError, match="NAKADI_METRICS_ENABLED='maybe' is not a valid bool"):
        Settings.from_env({"NAKADI_METRICS_ENABLED": "maybe"})


def test_the_kafka_stream_fetch_wait_is_configurable_within_bounds():
    assert Settings.from_env({}).kafka_stream_fetch_wait_ms == 20
    settings = Settings.from_env({"NAKADI_KAFKA_STREAM_FETCH_WAIT_MS": "500"})
    assert settings.kafka_stream_fetch_wait_ms == 500
    for wrong in ("0", "10001"):
        with pytest.raises(ValueError, match="NAKADI_KAFKA_STREAM_FETCH_WAIT_MS"):
            Settings.from_env({"NAKADI_KAFKA_STREAM_FETCH_WAIT_MS": wrong})
