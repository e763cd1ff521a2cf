from app.config import Settings
from app.security.scopes import Scope, configured_scopes


def test_changing_the_configuration_asks_the_admin_scope_until_it_has_its_own():
    """Deployments that set only the admin scope keep asking it for deleting event
    types and for settings, storages and timelines."""
    only_admin = configured_scopes(Settings(oauth2_admin_scope="nakadi.event_type.write"))
    assert only_admin[Scope.CONFIG] == only_admin[Scope.EVENT_TYPES] == "nakadi.event_type.write"
    both = configured_scopes(Settings(oauth2_admin_scope="nakadi.event_type.write",
                                      oauth2_config_scope=" nakadi.config.write "))
    assert both[Scope.CONFIG] == "nakadi.config.write"
    assert both[Scope.EVENT_TYPES] == "nakadi.event_type.write"
    assert set(configured_scopes(Settings()).values()) == {""}
