"""The full-disk tests' reasons not to run (tests/support/full_disk.py, tests/support/ci.py):
a skip only where user namespaces are disabled, saying which setting disables them, and in CI
a failure instead."""

from __future__ import annotations

import pytest

from tests.support.ci import skip_unless_ci
from tests.support.full_disk import NotMountable, not_mountable, userns_disabled

REFUSED = "unshare: unshare failed: Operation not permitted"


def test_the_reason_quotes_unshare_and_names_the_setting_that_disables_user_namespaces():
    reason = userns_disabled(REFUSED, {"/proc/sys/user/max_user_namespaces": "0",
                                       "/proc/sys/kernel/unprivileged_userns_clone": "1"})
    assert reason.startswith("user namespaces are disabled here "
                             "(/proc/sys/user/max_user_namespaces is 0)"), reason
    assert "unprivileged_userns_clone" not in reason
    assert reason.endswith(f"`unshare --user --map-root-user --mount` failed: {REFUSED}")


def test_a_refusal_no_setting_explains_is_said_so():
    reason = userns_disabled(REFUSED, {"/proc/sys/user/max_user_namespaces": "63432"})
    assert "(no /proc/sys setting says why)" in reason, reason


def test_only_a_refused_namespace_is_a_reason_to_skip():
    assert isinstance(not_mountable(REFUSED + "\n"), NotMountable)
    failed = not_mountable("mount: /tmp/x: unknown filesystem type 'tmpfs'.\n")
    assert type(failed) is RuntimeError
    assert str(failed) == ("mounting a tmpfs in a user namespace failed: mount: /tmp/x: "
                           "unknown filesystem type 'tmpfs'.")


@pytest.mark.parametrize("ci", ["true", "1", "yes"])
def test_in_ci_a_skip_fails_with_its_reason(monkeypatch, ci):
    monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.fail.Exception, match="cannot run in CI: user namespaces"):
        skip_unless_ci("user namespaces are disabled here")


@pytest.mark.parametrize("ci", [None, "", "0", "false"])
def test_outside_ci_it_is_a_skip_with_its_reason(monkeypatch, ci):
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match="^user namespaces are disabled here$"):
        skip_unless_ci("user namespaces are disabled here")
