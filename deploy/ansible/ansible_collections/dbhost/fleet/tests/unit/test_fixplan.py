# -*- coding: utf-8 -*-
# Copyright: the dbhost authors. Apache License 2.0 (see LICENSE).

"""Reading what `dbhost fix` prints and saves.

The fixtures are real dbhost's output (cmd/dbhost of this tree):
plan-net.json and plan-net.txt are `dbhost fix --plan --only
net.keepalive,net.fin_timeout --plan-out` of a development host (read-only);
changes-*.json and *.stderr are `fix --apply --format json` and `fix
--history --format json` on copy trees (`--root DIR --from baseline.tar.gz`,
the recorded host testdata/hosts/baseline, as internal/cli's
TestFixJSONChangeSets runs them): an apply (it waited for the host lock), a
failed one (the tree's /etc/sysctl.d mounted read-only), one refused (the
file changed since the plan), and the histories after rollbacks and a
sudo apply of every fix.
"""

from __future__ import absolute_import, division, print_function

import json
import unittest

import helpers  # noqa: F401 (puts the collection on sys.path)
from ansible_collections.dbhost.fleet.plugins.module_utils import fixplan


class Apply(unittest.TestCase):
    def test_applied_set(self):
        cs = fixplan.parse_applied(helpers.fixture("changes-apply.json"))
        self.assertEqual((cs["id"], cs["status"]), ("20261127T151042Z-a757", "applied"))
        after = fixplan.after_statuses(cs)
        self.assertEqual([(a["status"], a["target"]) for a in after],
                         [("fail", "net.fin_timeout"), ("fail", "net.keepalive")])
        self.assertTrue(after[0]["reason"].startswith("Orphaned connections stay in FIN-WAIT-2 for 60 s"))

    def test_failed_set(self):
        cs = fixplan.parse_applied(helpers.fixture("changes-apply-failed.json"))
        self.assertEqual((cs["id"], cs["status"]), ("20261127T151709Z-0026", "failed"))
        self.assertEqual(fixplan.after_statuses(cs), [])
        self.assertEqual(cs["errors"], ["create /tmp/json-rec/root2/etc/sysctl.d/60-dbhost.conf: read-only file system"])

    def test_no_set(self):
        self.assertIsNone(fixplan.parse_applied(""))
        self.assertIsNone(fixplan.parse_applied("\n"))

    def test_not_one_set(self):
        hist = helpers.fixture("changes-history.json")
        for text, why in ((hist, "2 change sets where the apply writes one"),
                          ('{"schema": "dbhost.changes/1", "change_sets": []}', "0 change sets"),
                          ("applied change set 20261127T150312Z-3fa2 (undo with: x)", "not JSON"),
                          ("[]", "not a JSON object"),
                          ('{"schema": "dbhost.changes/2", "change_sets": []}', "schema 'dbhost.changes/2', not dbhost.changes/1"),
                          ('{"change_sets": []}', "schema None"),
                          ('{"schema": "dbhost.changes/1", "change_sets": [{"status": "applied"}]}', "no list of change sets")):
            with self.assertRaises(ValueError) as e:
                fixplan.parse_applied(text)
            self.assertIn(why, str(e.exception))

    def test_plan_text(self):
        # What --apply --format json prints on stderr is the plan as --plan
        # prints it, without dbhost's messages.
        err = helpers.fixture("changes-apply.stderr")
        self.assertTrue(err.startswith("dbhost fix: waiting for the host lock"))
        text = fixplan.plan_text(err)
        self.assertTrue(text.startswith("Host plan: 2 fixes decided together"), text)
        self.assertIn("+net.ipv4.tcp_keepalive_time = 120\n", text)
        self.assertNotIn("dbhost fix:", text)
        failed = fixplan.plan_text(helpers.fixture("changes-apply-failed.stderr"))
        self.assertTrue(failed.endswith("not the live host\n"), failed)
        self.assertEqual(fixplan.plan_text(helpers.fixture("plan-net.txt")), helpers.fixture("plan-net.txt"))


class History(unittest.TestCase):
    def test_parse(self):
        sets = fixplan.parse_history(helpers.fixture("changes-history.json"))
        self.assertEqual([(s["id"], s["status"]) for s in sets], [
            ("20261127T151042Z-a757", "rolled-back"),
            ("20261127T151426Z-5ae1", "applied"),
        ])
        self.assertEqual(sets[0], {
            "id": "20261127T151042Z-a757", "status": "rolled-back", "created": "2026-11-27 15:10:42Z", "by": "root",
            "files": 1, "values": 0, "settings": 0, "fixed": ["net.fin_timeout", "net.keepalive"], "errors": [],
            "rolled_back_at": "2026-11-27 15:14:26Z", "rolled_back_by": "root"})
        self.assertEqual(sets[1]["by"], "root (sudo by alice)")
        self.assertEqual(sets[1]["files"], 4)
        self.assertEqual(sets[1]["fixed"][:3], ["mysql.hardening.empty_passwords (mysql:3306)",
                                                "limits.oom_score_adj (postgres:5432)",
                                                "mem.hugepages.postgres (postgres:5432)"])
        self.assertIn("storage.noatime (mount:/)", sets[1]["fixed"])
        self.assertNotIn("rolled_back_at", sets[1])
        self.assertEqual(fixplan.parse_history(helpers.fixture("changes-history-empty.json")), [])

    def test_failed(self):
        sets = fixplan.parse_history(helpers.fixture("changes-history-failed.json"))
        self.assertEqual([(s["status"], s.get("rolled_back_by")) for s in sets], [("failed", "apply"), ("rolled-back", "root")])
        self.assertEqual(sets[0]["errors"], ["create /tmp/json-rec/root2/etc/sysctl.d/60-dbhost.conf: read-only file system"])

    def test_refused(self):
        for text in ("no change sets in /var/lib/dbhost/changes\n", '{"schema": "dbhost.changes/2", "change_sets": []}',
                     '{"schema": "dbhost.changes/1"}', '{"schema": "dbhost.changes/1", "change_sets": [{}]}'):
            with self.assertRaises(ValueError):
                fixplan.parse_history(text)

    def test_times(self):
        self.assertEqual(fixplan.utc_text("2026-11-27T15:10:42.097866385Z"), "2026-11-27 15:10:42Z")
        self.assertEqual(fixplan.utc_text("2026-11-27T16:10:42+01:00"), "2026-11-27 15:10:42Z")
        self.assertEqual(fixplan.utc_text("2026-11-27T00:10:42.5-01:30"), "2026-11-27 01:40:42Z")
        self.assertEqual(fixplan.utc_text(None), "")

    def test_find(self):
        sets = fixplan.parse_history(helpers.fixture("changes-history.json"))
        self.assertEqual(fixplan.find_set(sets)["id"], "20261127T151426Z-5ae1")
        self.assertEqual(fixplan.find_set(sets, "20261127T151042Z-a757")["status"], "rolled-back")
        self.assertIsNone(fixplan.find_set(sets, "20261127T000000Z-0000"))
        self.assertIsNone(fixplan.find_set(sets[:1]))

    def test_since(self):
        sets = fixplan.parse_history(helpers.fixture("changes-history.json"))
        self.assertEqual([s["id"] for s in fixplan.since(sets, "20261127T151042Z")],
                         ["20261127T151042Z-a757", "20261127T151426Z-5ae1"])
        self.assertEqual([s["id"] for s in fixplan.since(sets, "20261127T151043Z")], ["20261127T151426Z-5ae1"])
        self.assertEqual(fixplan.since(sets, "20261127T151427Z"), [])

    def test_change_id(self):
        self.assertTrue(fixplan.CHANGE_ID_RE.match("20261127T150312Z-3fa2"))
        for bad in ("latest", "20261127T150312Z-3fa2 --apply", "../20261127T150312Z-3fa2", "--recover"):
            self.assertIsNone(fixplan.CHANGE_ID_RE.match(bad), bad)
        for cs in json.loads(helpers.fixture("changes-history.json"))["change_sets"]:
            self.assertTrue(fixplan.CHANGE_ID_RE.match(cs["id"]), cs["id"])


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
