"""SelfSubjectAccessReview on the loopback API server, through the official typed client: the
token may do anything but what a standing 403 rule refuses; a counted 403 is no missing
right; the review's own request is recorded."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from placer.testing import ApiServer


def _review(
    api: client.AuthorizationV1Api, **attributes: str
) -> client.V1SubjectAccessReviewStatus:
    body = client.V1SelfSubjectAccessReview(
        spec=client.V1SelfSubjectAccessReviewSpec(
            resource_attributes=client.V1ResourceAttributes(**attributes)
        )
    )
    answer = api.create_self_subject_access_review(body)
    assert answer.kind == "SelfSubjectAccessReview"
    status: client.V1SubjectAccessReviewStatus = answer.status
    return status


@pytest.fixture
def authz(
    apiserver: ApiServer, kube_client: Callable[..., client.ApiClient]
) -> client.AuthorizationV1Api:
    return client.AuthorizationV1Api(kube_client(apiserver))


def test_allowed_unless_a_standing_403_rule_matches(
    apiserver: ApiServer, authz: client.AuthorizationV1Api
) -> None:
    assert _review(authz, verb="list", resource="pods").allowed is True
    apiserver.faults.fail(
        403, times=None, verb="list", resource="pods", message="no list on pods for you"
    )
    refused = _review(authz, verb="list", resource="pods")
    assert refused.allowed is False and refused.reason == "no list on pods for you"
    assert _review(authz, verb="get", resource="pods").allowed is True
    apiserver.faults.fail(403, times=None, resource="jobsets.jobset.x-k8s.io", namespace="ml")
    assert (
        _review(
            authz, verb="create", group="jobset.x-k8s.io", resource="jobsets", namespace="ml"
        ).allowed
        is False
    )
    assert (
        _review(
            authz, verb="create", group="jobset.x-k8s.io", resource="jobsets", namespace="x"
        ).allowed
        is True
    )


def test_a_counted_403_is_not_a_missing_right(
    apiserver: ApiServer, authz: client.AuthorizationV1Api
) -> None:
    rule = apiserver.faults.fail(403, times=1, verb="delete", resource="configmaps")
    assert _review(authz, verb="delete", resource="configmaps").allowed is True
    assert rule.hits == 0  # the review did not spend the fault


def test_a_review_without_attributes_is_invalid(
    apiserver: ApiServer, authz: client.AuthorizationV1Api
) -> None:
    with pytest.raises(ApiException) as err:
        authz.create_self_subject_access_review(
            client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec())
        )
    assert err.value.status == 422 and "resourceAttributes" in str(err.value.body)
