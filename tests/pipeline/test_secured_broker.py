"""The data source against a broker with authentication on, and event types that
only some may read: the token (or token file) of a reader reads them, anyone else
gets one clear line saying what to fix."""

from __future__ import annotations

import pytest
import requests
from pyspark.errors import AnalysisException, PySparkException

from tests.api.security.conftest import auth, business_event
from tests.pipeline.test_source import nakadi, one_line_error


@pytest.fixture
def protected_orders(secure_url, protected_event_types) -> tuple[str, list[str]]:
    """A protected event type (read by the service ``stups_app`` only) holding five
    events, and their eids."""
    name = protected_event_types()
    events = [business_event(n) for n in range(5)]
    response = requests.post(f"{secure_url}/event-types/{name}/events", headers=auth("alice"),
                             json=events)
    assert response.status_code == 200, response.text
    return name, sorted(event["metadata"]["eid"] for event in events)


def test_a_reader_s_token_or_token_file_reads_a_protected_event_type(
        spark, secure_url, protected_orders, tmp_path):
    name, eids = protected_orders
    rows = nakadi(spark, secure_url, name, token="app-token").collect()
    assert sorted(row["eid"] for row in rows) == eids
    token_file = tmp_path / "token"
    token_file.write_text("app-token\n")
    rows = nakadi(spark, secure_url, name, token_file=str(token_file)).collect()
    assert sorted(row["eid"] for row in rows) == eids


def test_without_a_token_the_error_says_to_give_one(spark, secure_url, protected_orders):
    name, _ = protected_orders
    with pytest.raises(AnalysisException) as caught:
        nakadi(spark, secure_url, name)
    text = one_line_error(caught.value)
    assert "refused" in text and "401" in text, text
    assert "give a valid token (token / token_file option)" in text


def test_a_token_that_may_not_read_the_events_is_refused_clearly(
        spark, secure_url, protected_orders):
    """alice writes and administers the event type but is not among its readers."""
    name, _ = protected_orders
    with pytest.raises(PySparkException) as caught:
        nakadi(spark, secure_url, name, token="alice-token").collect()
    text = one_line_error(caught.value)
    assert "refused" in text and "403" in text, text
    assert "may not read" in text  # the broker's reason
    assert "use the token of a reader of the event type" in text
