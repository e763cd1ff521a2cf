"""The Storage object of the API masks passwords, even in a URL stored before
``database_url`` was checked as a URL."""

from __future__ import annotations

from app.repository.storages import Storage
from app.storage.configuration import storage_view


def view_of(url: str) -> str:
    storage = Storage("pg-2", "postgres", {"database_url": url}, False)
    return storage_view(storage)["postgres_configuration"]["database_url"]


def test_a_password_is_masked():
    assert view_of("postgresql://nakadi:secret@db:5432/nakadi") == \
        "postgresql://nakadi:***@db:5432/nakadi"


def test_a_url_without_password_is_shown_as_it_is():
    assert view_of("postgresql://nakadi@db:5432/nakadi") == "postgresql://nakadi@db:5432/nakadi"


def test_a_url_python_cannot_parse_is_shown_without_its_user_and_password():
    assert view_of("postgresql://nakadi:p[w@db:5432/nakadi") == "postgresql://***@db:5432/nakadi"


def test_a_password_in_the_query_is_masked_too():
    # libpq takes password and sslpassword from the query as well; before, they were
    # shown as given.
    assert view_of("postgresql://nakadi@db/nakadi?password=secret&sslmode=require") == \
        "postgresql://nakadi@db/nakadi?password=***&sslmode=require"
    assert view_of("postgresql://u:one@db/n?sslpassword=two") == \
        "postgresql://u:***@db/n?sslpassword=***"


def test_a_query_without_secrets_is_shown_as_it_is():
    assert view_of("postgresql://nakadi@db/nakadi?sslmode=require&application_name=a%20b") \
        == "postgresql://nakadi@db/nakadi?sslmode=require&application_name=a%20b"
