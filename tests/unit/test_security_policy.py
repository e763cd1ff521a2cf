"""The authorization rules, without any I/O."""

from __future__ import annotations

import pytest

from app.config import Settings
from app.domain.event_type import AuthorizationAttribute as A
from app.domain.event_type import EventTypeAuthorization
from app.domain.security import AdminAuthorization, AdminPermission, BlacklistType
from app.domain.security import SecuritySettings as Stored
from app.security.policy import Operation, Policy
from app.security.subjects import Subject, parse_attribute_list, parse_realms

ALICE, BOB = Subject("user", "alice"), Subject("user", "bob")
APP = Subject("service", "stups_app")
ROOT = (A("user", "root"),)
CONFIGURED = AdminAuthorization(ROOT, ROOT, ROOT)
SECTION = EventTypeAuthorization(admins=(A("user", "alice"),),
                                 readers=(A("service", "*"),),
                                 writers=(A("*", "bob"),))


def policy(subject, stored: Stored | None = None) -> Policy:
    return Policy(subject, stored or Stored(), CONFIGURED)


@pytest.mark.parametrize(("subject", "operation", "allowed"), [
    (ALICE, Operation.ADMIN, True), (BOB, Operation.ADMIN, False),
    (APP, Operation.READ, True), (ALICE, Operation.READ, False),
    (BOB, Operation.WRITE, True), (Subject("service", "bob"), Operation.WRITE, True),
    (ALICE, Operation.WRITE, False),
])
def test_an_attribute_or_its_wildcards_authorize(subject, operation, allowed):
    assert bool(policy(subject).event_type("et", SECTION, operation)) is allowed


def test_a_refusal_names_the_subject_the_list_and_the_resource():
    decision = policy(BOB).event_type("et", SECTION, Operation.READ)
    assert decision.reason == "user:bob may not read EventType 'et': it is not one of its readers"


def test_no_section_or_no_authentication_means_allowed():
    assert policy(BOB).event_type("et", None, Operation.ADMIN)
    assert policy(None).event_type("et", SECTION, Operation.ADMIN)
    assert policy(None).admin(AdminPermission.ADMIN)


def test_nakadi_admins_are_authorized_for_every_resource():
    root = Subject("user", "root")
    for operation in Operation:
        assert policy(root).event_type("et", SECTION, operation)
        assert policy(root).subscription("s", {"admins": [], "readers": []}, operation)


def test_stored_admins_replace_the_configured_ones():
    stored = Stored(admins=AdminAuthorization((A("user", "alice"),), ROOT, ROOT))
    assert policy(ALICE, stored).admin(AdminPermission.ADMIN)
    assert not policy(Subject("user", "root"), stored).admin(AdminPermission.ADMIN)
    assert policy(Subject("user", "root"), stored).admin(AdminPermission.READ)


def test_subscription_readers_and_admins():
    section = {"admins": [{"data_type": "user", "value": "alice"}],
               "readers": [{"data_type": "*", "value": "*"}]}
    assert policy(BOB).subscription("s", section, Operation.READ)
    assert not policy(BOB).subscription("s", section, Operation.ADMIN)
    assert policy(ALICE).subscription("s", section, Operation.ADMIN)
    assert policy(BOB).subscription("s", None, Operation.ADMIN)


def test_the_blacklist_blocks_apps_and_event_types_by_role():
    stored = Stored(blacklist=frozenset({(BlacklistType.CONSUMER_APP, "stups_app"),
                                         (BlacklistType.PRODUCER_ET, "orders")}))
    assert not policy(APP, stored).may_consume(["x"])
    assert policy(APP, stored).may_publish("x")
    assert not policy(ALICE, stored).may_publish("orders")
    assert policy(ALICE, stored).may_consume(["orders"])
    # Event types stay blocked with authentication off.
    assert not policy(None, stored).may_publish("orders")


def test_configured_lists_are_parsed_and_checked():
    assert parse_attribute_list(" user:alice, service:stups_app ,", "X") == (
        A("user", "alice"), A("service", "stups_app"))
    assert parse_realms("/employees=user,services=service") == {"employees": "user",
                                                                "services": "service"}
    with pytest.raises(ValueError, match="NAKADI_ADMINS"):
        Settings.from_env({"NAKADI_ADMINS": "alice"})
    with pytest.raises(ValueError, match="NAKADI_OAUTH2_REALMS"):
        Settings.from_env({"NAKADI_OAUTH2_REALMS": "/employees"})
