"""Label and field selector parsing and matching (pure, no server)."""

from __future__ import annotations

import pytest

from placer.testing import BUILTIN_RESOURCES, StatusError
from placer.testing._selectors import FieldSelector, LabelSelector

PODS = next(rt for rt in BUILTIN_RESOURCES if rt.plural == "pods")
LABELS = {"app": "web", "tier": "front", "version": "3"}


@pytest.mark.parametrize(
    ("selector", "selected"),
    [
        ("", True),
        ("app", True),
        ("!app", False),
        ("missing", False),
        ("!missing", True),
        ("app=web", True),
        ("app==web", True),
        ("app!=web", False),
        ("missing!=x", True),
        ("app in (web, api)", True),
        ("app in (api)", False),
        ("app notin (api,db)", True),
        ("missing notin (api)", True),
        ("app=web,tier=front", True),
        ("app=web,tier=back", False),
        ("version>2", True),
        ("version<2", False),
        ("app>2", False),
        (" app = web , tier in ( front ) ", True),
    ],
)
def test_label_selector_matching(selector: str, selected: bool) -> None:
    assert LabelSelector(selector).matches(LABELS) is selected


@pytest.mark.parametrize(
    "selector",
    [
        "app in web",
        "app in ()",
        "=web",
        "app=web,",
        "app=web tier=x",
        "bad key=x",
        "app=-x-",
        "version>a",
    ],
)
def test_malformed_label_selectors_are_400(selector: str) -> None:
    with pytest.raises(StatusError) as err:
        LabelSelector(selector)
    assert err.value.code == 400 and err.value.reason == "BadRequest"
    assert err.value.message.startswith("unable to parse requirement")


@pytest.mark.parametrize(
    ("selector", "selected"),
    [
        ("metadata.name=p", True),
        ("metadata.namespace=other", False),
        ("spec.nodeName=n1", True),
        ("spec.nodeName!=n1", False),
        ("status.phase==Running,spec.nodeName=n1", True),
        ("spec.hostNetwork=false", True),
        ("status.podIP=", True),
    ],
)
def test_field_selector_matching(selector: str, selected: bool) -> None:
    pod = {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"nodeName": "n1", "hostNetwork": False},
        "status": {"phase": "Running"},
    }
    assert FieldSelector(selector, PODS).matches(pod) is selected


def test_field_selector_refuses_unsupported_labels_and_operators() -> None:
    with pytest.raises(StatusError) as err:
        FieldSelector("spec.containers=x", PODS)
    assert err.value.message == "field label not supported: spec.containers"
    with pytest.raises(StatusError):
        FieldSelector("status.phase in (Running)", PODS)
