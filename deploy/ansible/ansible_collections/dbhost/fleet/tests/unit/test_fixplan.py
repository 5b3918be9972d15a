# -*- coding: utf-8 -*-
# Copyright: the dbhost authors. Apache License 2.0 (see LICENSE).

"""Reading what `dbhost fix` prints and saves.

plan-net.json is `dbhost fix --plan --only net.keepalive,net.fin_timeout
--plan-out` of a development host. The text outputs are those of
internal/cli/fixapply.go (fixApply, fixHistory), line for line.
"""

from __future__ import absolute_import, division, print_function

import unittest

import helpers  # noqa: F401 (puts the collection on sys.path)
from ansible_collections.dbhost.fleet.plugins.module_utils import fixplan

APPLY_OUT = """Host plan: 2 fixes decided together (1 rounds); every check they fix passes on the planned host and no passing check fails.
Fixes for 2 findings.

file /etc/sysctl.d/60-dbhost.conf (mode 0644, new file; for net.fin_timeout, net.keepalive)
--- /dev/null
+++ b/etc/sysctl.d/60-dbhost.conf
+# net.fin_timeout
+net.ipv4.tcp_fin_timeout = 30

value /proc/sys/net/ipv4/tcp_fin_timeout: 60 -> 30 (for net.fin_timeout)

applied change set 20261127T150312Z-3fa2 (undo with: dbhost fix --rollback 20261127T150312Z-3fa2)
  postgres:5432: needs a restart for shared_buffers: not restarted
  note: udevd is not running: the rule applies at the next boot
  pass  net.fin_timeout
  fail  pg.shared_buffers (postgres:5432)
"""

HISTORY_OUT = """20261127T150312Z-3fa2  rolled-back  2026-11-27 15:03:12Z  by root: 1 files, 3 values, 0 settings; fixed net.fin_timeout, net.keepalive
    rolled back 2026-11-27 15:04:01Z by root
20261127T150502Z-0b1c  applied      2026-11-27 15:05:02Z  by root (sudo by alice): 1 files, 0 values, 1 settings; \
fixed pg.work_mem (postgres:5432), limits.nofile (mysql:3306)
20261127T150633Z-77aa  failed       2026-11-27 15:06:33Z  by root: 0 files, 1 values, 0 settings; fixed mem.swappiness
    rolled back 2026-11-27 15:06:33Z by apply
    error: write /proc/sys/vm/swappiness: permission denied
"""


class Apply(unittest.TestCase):
    def test_change_id(self):
        self.assertEqual(fixplan.applied_id(APPLY_OUT), "20261127T150312Z-3fa2")
        self.assertIsNone(fixplan.applied_id("No failing finding has a fix: nothing to change.\n"))
        # Only dbhost's own line counts, not a file's diff that mentions one.
        self.assertIsNone(fixplan.applied_id("+# applied change set 20261127T150312Z-3fa2 (undo with: x)\n"))

    def test_after(self):
        self.assertEqual(fixplan.after_statuses(APPLY_OUT), [
            {"status": "pass", "target": "net.fin_timeout"},
            {"status": "fail", "target": "pg.shared_buffers (postgres:5432)"},
        ])
        self.assertEqual(fixplan.after_statuses("Fixes for 0 findings.\n"), [])

    def test_plan_text(self):
        text = fixplan.plan_text(APPLY_OUT)
        self.assertTrue(text.endswith("value /proc/sys/net/ipv4/tcp_fin_timeout: 60 -> 30 (for net.fin_timeout)\n\n"))
        self.assertNotIn("applied change set", text)


class History(unittest.TestCase):
    def test_parse(self):
        sets = fixplan.parse_history(HISTORY_OUT)
        self.assertEqual([(s["id"], s["status"]) for s in sets], [
            ("20261127T150312Z-3fa2", "rolled-back"),
            ("20261127T150502Z-0b1c", "applied"),
            ("20261127T150633Z-77aa", "failed"),
        ])
        self.assertEqual(sets[0]["fixed"], ["net.fin_timeout", "net.keepalive"])
        self.assertEqual(sets[0]["rolled_back_by"], "root")
        self.assertEqual(sets[1]["fixed"], ["pg.work_mem (postgres:5432)", "limits.nofile (mysql:3306)"])
        self.assertEqual(sets[1]["by"], "root (sudo by alice)")
        self.assertEqual((sets[1]["files"], sets[1]["values"], sets[1]["settings"]), (1, 0, 1))
        self.assertEqual(fixplan.parse_history("no change sets in /var/lib/dbhost/changes\n"), [])

    def test_find(self):
        sets = fixplan.parse_history(HISTORY_OUT)
        self.assertEqual(fixplan.find_set(sets)["id"], "20261127T150502Z-0b1c")
        self.assertEqual(fixplan.find_set(sets, "20261127T150312Z-3fa2")["status"], "rolled-back")
        self.assertIsNone(fixplan.find_set(sets, "20261127T000000Z-0000"))
        self.assertIsNone(fixplan.find_set(sets[:1]))

    def test_new_sets(self):
        sets = fixplan.parse_history(HISTORY_OUT)
        self.assertEqual([s["id"] for s in fixplan.new_sets(sets[:1], sets)],
                         ["20261127T150502Z-0b1c", "20261127T150633Z-77aa"])

    def test_id(self):
        self.assertTrue(fixplan.CHANGE_ID_RE.match("20261127T150312Z-3fa2"))
        for bad in ("latest", "20261127T150312Z-3fa2 --apply", "../20261127T150312Z-3fa2", "--recover"):
            self.assertIsNone(fixplan.CHANGE_ID_RE.match(bad), bad)


class SavedPlan(unittest.TestCase):
    def test_recorded(self):
        plan = fixplan.load_plan(helpers.fixture("plan-net.json"))
        self.assertTrue(fixplan.plan_changes(plan))
        self.assertEqual(fixplan.plan_checks(plan), ["net.fin_timeout", "net.keepalive"])
        self.assertEqual(fixplan.plan_targets(plan), ["net.fin_timeout", "net.keepalive"])
        s = fixplan.plan_summary(plan)
        self.assertEqual(s["files"], ["/etc/sysctl.d/60-dbhost.conf"])
        self.assertEqual(s["values"], ["/proc/sys/net/ipv4/tcp_fin_timeout: 60 -> 30",
                                       "/proc/sys/net/ipv4/tcp_keepalive_time: 7200 -> 120",
                                       "/proc/sys/net/ipv4/tcp_keepalive_intvl: 75 -> 30"])

    def test_unchanged(self):
        plan = fixplan.load_plan(helpers.fixture("plan-net.json"))
        for kind in ("files", "values"):
            for item in plan[kind]:
                item["unchanged"] = True
        self.assertFalse(fixplan.plan_changes(plan))
        plan["settings"] = [{"server": {"name": "postgres:5432"}, "key": "work_mem", "old": "4MB", "new": "16MB"}]
        self.assertTrue(fixplan.plan_changes(plan))
        self.assertEqual(fixplan.plan_summary(plan)["settings"], ["postgres:5432 work_mem: 4MB -> 16MB"])

    def test_targets_name_instances(self):
        plan = {"findings": [{"id": "pg.work_mem", "subject": "postgres:5432"}, {"id": "mem.swappiness", "subject": "host"}]}
        self.assertEqual(fixplan.plan_targets(plan), ["pg.work_mem (postgres:5432)", "mem.swappiness"])

    def test_not_a_plan(self):
        for text in ("[]", "{}", "not json"):
            with self.assertRaises(ValueError):
                fixplan.load_plan(text)


if __name__ == "__main__":
    unittest.main()
