"""Storages and timelines through the HTTP API: putting an event type on a storage
without changing which storage is the default (a table every test reads)."""

from __future__ import annotations

import requests


def default_storage_id(base_url: str) -> str:
    storages = requests.get(base_url + "/storages", timeout=10).json()
    return next(storage["id"] for storage in storages if storage["default"])


def switch_timeline(base_url: str, name: str, storage_id: str,
                    **kwargs) -> requests.Response:
    return requests.post(f"{base_url}/event-types/{name}/timelines",
                         json={"storage_id": storage_id}, timeout=30, **kwargs)


def move_to(base_url: str, name: str, storage_id: str) -> None:
    """Make ``storage_id`` the storage of the event type's active timeline."""
    timelines = requests.get(f"{base_url}/event-types/{name}/timelines", timeout=10).json()
    if timelines[-1]["storage_id"] != storage_id:
        response = switch_timeline(base_url, name, storage_id)
        assert response.status_code == 201, response.text
