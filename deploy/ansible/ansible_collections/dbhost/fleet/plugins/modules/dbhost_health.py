#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: the dbhost authors. Apache License 2.0 (see LICENSE).

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dbhost_health
short_description: Wait until a host's databases are healthy, as dbhost audits them
version_added: "1.0.0"
description:
  - The gate of a roll-out. Runs C(dbhost audit --only CHECKS --format json) until the host is
    healthy or I(timeout) seconds have passed, I(delay) seconds between tries.
  - "Healthy: every database expected answers dbhost live (C(instances[].settings_source) is
    C(live)); every finding of the checks in I(only) passes (a waived failure counts as passing);
    every Galera node (C(instances[].galera)) is C(Synced), C(ready), in a C(Primary) component
    of at least the cluster size it had before."
  - The databases expected are those in I(expect), the C(expect) a call before the change
    returned; without I(expect), every database dbhost finds must answer.
  - Reads only; runs the same in check mode.
options:
  only:
    description:
      - The checks that must pass (IDs or domain prefixes), e.g. the C(checks) a C(dbhost_fix)
        plan fixes. Empty, no check is judged; the databases still are.
    type: list
    elements: str
    default: []
  expect:
    description:
      - What must hold after a change, as the C(expect) of an earlier call returned it.
      - C(instances), the names of the databases that must answer; C(galera), each Galera node's
        cluster size before (the cluster must not be smaller).
    type: dict
  timeout:
    description: Seconds to keep trying. 0 tries once.
    type: int
    default: 120
  delay:
    description: Seconds between tries.
    type: int
    default: 5
  audit_timeout:
    description:
      - The least time one try's audit gets (seconds), even past O(timeout); an audit that takes
        longer (a server that accepts and never answers) is stopped and the try fails. A try may
        also take the time left before O(timeout).
    type: int
    default: 30
extends_documentation_fragment:
  - dbhost.fleet.common
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
notes:
  - Run it as root (become) to judge what dbhost judges as root; without root some findings are
    C(unknown), which the gate counts as failing.
  - A Galera node is judged from C(instances[].galera) of the audit JSON; an instance without it
    is no Galera node (or dbhost could not read its status), unless it had one before.
seealso:
  - module: dbhost.fleet.dbhost_fix
author:
  - the dbhost authors
"""

EXAMPLES = r"""
- name: Before the change, record what must answer afterwards
  dbhost.fleet.dbhost_health:
    timeout: 0
  register: before

- name: After the change, wait for the databases and the fixed checks
  dbhost.fleet.dbhost_health:
    only: "{{ plan.checks }}"
    expect: "{{ before.expect }}"
    timeout: 120
    delay: 5
"""

RETURN = r"""
healthy:
  description: Whether the last try found the host healthy (a failed task has false).
  returned: always
  type: bool
failures:
  description: Why the host is not healthy, one reason each, from the last try.
  returned: always
  type: list
  elements: str
  sample: ["postgres:5432: does not answer (dial unix /var/run/postgresql/.s.PGSQL.5432: connect: no such file or directory)"]
instances:
  description: The databases dbhost found, with C(name), C(engine), C(flavor), C(settings_source), C(live_error), C(galera).
  returned: always
  type: list
  elements: dict
galera:
  description: Each Galera node's cluster size, by instance name.
  returned: always
  type: dict
  sample: {"mysql:3306": 3}
expect:
  description: What a later call should expect (pass it as I(expect)) - the databases that answer now and the Galera sizes now.
  returned: always
  type: dict
  sample: {"instances": ["postgres:5432"], "galera": {}}
checks:
  description: The findings of the checks in I(only), C(id), C(subject), C(status), C(waived).
  returned: always
  type: list
  elements: dict
attempts:
  description: How many times dbhost audited the host.
  returned: always
  type: int
elapsed:
  description: Seconds from the first try to the verdict.
  returned: always
  type: float
cmd:
  description: The dbhost command, as a list of arguments.
  returned: always
  type: list
  elements: str
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dbhost.fleet.plugins.module_utils import binary as dbbin
from ansible_collections.dbhost.fleet.plugins.module_utils import health


def main():
    module = AnsibleModule(
        argument_spec=dbbin.argument_spec(
            only=dict(type="list", elements="str", default=[]),
            expect=dict(type="dict"),
            timeout=dict(type="int", default=120),
            delay=dict(type="int", default=5),
            audit_timeout=dict(type="int", default=30),
        ),
        mutually_exclusive=[("waivers", "no_waivers")],
        supports_check_mode=True,
    )
    p = module.params
    dbbin.check_common(module)
    if p["timeout"] < 0 or p["delay"] < 0 or p["audit_timeout"] < 1:
        module.fail_json(msg="timeout and delay are seconds, 0 or more; audit_timeout 1 or more")
    expect = p["expect"]
    if expect is not None:
        if not isinstance(expect.get("instances", []), list) or not isinstance(expect.get("galera", {}), dict):
            module.fail_json(msg="expect takes instances (a list of names) and galera (sizes by name)")

    # --fail-on none: exit 1 only means findings failed, which the gate judges itself.
    cmd = [p["binary"], "audit", "--format=json", "--fail-on=none"] + dbbin.selection_args(
        dict(only=p["only"], budget=p["budget"], waivers=p["waivers"], no_waivers=p["no_waivers"]))
    clock = getattr(time, "monotonic", time.time)  # Python 2 targets have no monotonic clock
    # An audit takes about a second; one that hangs (a server that accepts
    # and never answers) must fail the gate at its deadline, not hold the
    # roll-out: each try is bounded by coreutils' timeout.
    bound = module.get_bin_path("timeout", required=True)
    start = clock()
    attempts = 0
    while True:
        attempts += 1
        limit = max(p["audit_timeout"], int(p["timeout"] - (clock() - start)))
        rc, out, err = module.run_command([bound, "--kill-after=5", str(limit)] + cmd, environ_update={"LC_ALL": "C"})
        if rc in (124, 137):
            rc, err = 2, "dbhost audit did not finish in %d s (stopped)" % limit
        verdict = health.judge_run(rc, out, err, p["only"], expect)
        elapsed = clock() - start
        if verdict["healthy"] or elapsed + p["delay"] > p["timeout"]:
            break
        time.sleep(p["delay"])

    verdict.update(attempts=attempts, elapsed=round(elapsed, 2), cmd=cmd, changed=False)
    if not verdict["healthy"]:
        module.fail_json(msg="not healthy after %d tries in %.0f s: %s" % (attempts, elapsed, "; ".join(verdict["failures"])), **verdict)
    module.exit_json(msg="healthy after %d tries in %.1f s" % (attempts, elapsed), **verdict)


if __name__ == "__main__":
    main()
