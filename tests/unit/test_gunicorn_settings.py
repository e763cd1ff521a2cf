"""A worker's gunicorn settings read as plain attributes, with the same values."""

from __future__ import annotations

import pytest
from gunicorn.config import Config

from app.gunicorn_settings import settings_as_attributes


@pytest.fixture
def cfg() -> Config:
    config = Config()
    config.set("keepalive", 75)
    config.set("worker_class", "gevent")
    config.set("limit_request_line", 8190)
    return config


def test_every_setting_reads_as_before_without_config_getattr(cfg, monkeypatch):
    before = {name: getattr(cfg, name) for name in cfg.settings}
    settings_as_attributes(cfg)

    def refused(self: Config, name: str) -> object:
        raise AssertionError(f"{name} went through Config.__getattr__")

    monkeypatch.setattr(Config, "__getattr__", refused)
    assert {name: getattr(cfg, name) for name in cfg.settings} == before
    assert cfg.keepalive == 75 and cfg.limit_request_line == 8190


def test_settings_config_has_as_properties_still_read_as_properties(cfg):
    settings_as_attributes(cfg)
    # the setting holds a name; the property loads the class it names
    assert cfg.settings["worker_class"].get() == "gevent"
    assert cfg.worker_class.__name__ == "GeventWorker"
