"""The properties file that says how to reach a Kafka needing TLS or SASL."""

from __future__ import annotations

import pytest

from app.config import Settings
from app.storage.kafka.client_properties import (
    ClientPropertiesError,
    parse_client_properties,
    read_client_properties,
)


def test_a_properties_file_as_kafka_clients_write_them():
    text = """
# how to reach the cluster
! also a comment
security.protocol=SASL_SSL
sasl.mechanism : PLAIN
sasl.username=nakadi
sasl.password=p=ss:word
ssl.ca.location = /etc/ssl/certs/kafka-ca.pem
"""
    assert parse_client_properties(text, "f") == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
        "sasl.username": "nakadi", "sasl.password": "p=ss:word",
        "ssl.ca.location": "/etc/ssl/certs/kafka-ca.pem"}


@pytest.mark.parametrize(("text", "complaint"), [
    ("security.protocol", "line 1: expected name=value"),
    ("=SSL", "line 1: expected name=value"),
    ("# fine\nacks=1", "line 2: 'acks' cannot be set here"),
    ("enable.idempotence=false", "'enable.idempotence' cannot be set here"),
    ("bootstrap.servers=elsewhere:9092", "'bootstrap.servers' cannot be set here"),
    ("ssl.ca.location=a\nssl.ca.location=b", "line 2: 'ssl.ca.location' is set twice"),
])
def test_what_the_file_may_not_say_is_refused_naming_the_line(text, complaint):
    with pytest.raises(ClientPropertiesError, match=complaint):
        parse_client_properties(text, "f")


def test_the_settings_read_the_file_and_refuse_an_unreadable_one(tmp_path):
    path = tmp_path / "kafka.properties"
    path.write_text("security.protocol=SSL\n")
    assert Settings.from_env({"NAKADI_KAFKA_CLIENT_PROPERTIES": str(path)}
                             ).kafka_client_config == {"security.protocol": "SSL"}
    assert Settings.from_env({}).kafka_client_config == {}
    with pytest.raises(ClientPropertiesError, match="cannot be read"):
        read_client_properties(str(tmp_path / "missing.properties"))
    with pytest.raises(ClientPropertiesError, match="cannot be read"):
        Settings.from_env({"NAKADI_KAFKA_CLIENT_PROPERTIES": str(tmp_path)})
