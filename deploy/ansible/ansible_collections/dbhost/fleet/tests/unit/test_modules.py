# -*- coding: utf-8 -*-
# Copyright: the dbhost authors. Apache License 2.0 (see LICENSE).

"""dbhost_fix and dbhost_health run as Ansible runs them (a process given
its arguments as JSON), against a stand-in dbhost (fake_dbhost.py): the
commands they run, check mode, diff, changed, failures and change IDs."""

from __future__ import absolute_import, division, print_function

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import helpers

ENV = dict(os.environ, PYTHONPATH=helpers.COLLECTIONS_ROOT, LC_ALL="C")


def run_module(name, args, check=False, diff=False, tmp=None):
    """Runs the module; returns (failed, result)."""
    params = dict(args)
    params.update(_ansible_check_mode=check, _ansible_diff=diff, _ansible_tmpdir=tmp,
                  _ansible_remote_tmp=tmp, _ansible_keep_remote_files=False)
    with tempfile.NamedTemporaryFile("w", suffix=".json", dir=tmp, delete=False) as f:
        json.dump({"ANSIBLE_MODULE_ARGS": params}, f)
    p = subprocess.run([sys.executable, os.path.join(helpers.MODULES, name + ".py"), f.name],
                       env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    try:
        result = json.loads(p.stdout)
    except ValueError:
        raise AssertionError("%s printed no JSON (exit %d):\n%s\n%s" % (name, p.returncode, p.stdout, p.stderr))
    return bool(result.get("failed")), result


class ModuleCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dbhost-modules-")
        self.addCleanup(shutil.rmtree, self.dir)
        self.state = os.path.join(self.dir, "host")
        self.binary = helpers.fake_binary(self.state)
        self.tmp = os.path.join(self.dir, "tmp")
        os.mkdir(self.tmp, 0o700)
        self.plan_file = os.path.join(self.dir, "plans", "rollout-1.json")

    def fix(self, check=False, diff=False, **args):
        args.setdefault("binary", self.binary)
        return run_module("dbhost_fix", args, check=check, diff=diff, tmp=self.tmp)

    def health(self, check=False, **args):
        args.setdefault("binary", self.binary)
        return run_module("dbhost_health", args, check=check, tmp=self.tmp)

    def modes(self):
        """The fix modes the stand-in ran, in order."""
        return [c[1] for c in helpers.calls(self.state) if c[0] == "fix"]


class Fix(ModuleCase):
    def test_planned_saves_the_plan_and_reports_pending(self):
        failed, r = self.fix(state="planned", only=["net.keepalive", "net.fin_timeout"], plan_file=self.plan_file)
        self.assertFalse(failed, r)
        self.assertTrue(r["changed"])
        self.assertEqual(r["checks"], ["net.fin_timeout", "net.keepalive"])
        self.assertEqual(r["files"], ["/etc/sysctl.d/60-dbhost.conf"])
        self.assertNotIn("diff", r)
        self.assertEqual(helpers.calls(self.state), [
            ["fix", "--plan", "--plan-out=" + self.plan_file, "--only=net.keepalive,net.fin_timeout"]])
        self.assertEqual(os.stat(os.path.dirname(self.plan_file)).st_mode & 0o777, 0o700)
        self.assertTrue(os.path.exists(self.plan_file))

    def test_planned_nothing_pending(self):
        helpers.configure(self.state, pending=False)
        failed, r = self.fix(state="planned")
        self.assertFalse(failed, r)
        self.assertFalse(r["changed"])

    def test_check_mode_diff_shows_the_plan_and_writes_nothing(self):
        for state in ("planned", "applied"):
            failed, r = self.fix(state=state, plan_file=self.plan_file, check=True, diff=True)
            self.assertFalse(failed, r)
            self.assertTrue(r["changed"])
            self.assertIn("+net.ipv4.tcp_keepalive_time = 120", r["diff"]["prepared"])
            self.assertIn("value /proc/sys/net/ipv4/tcp_keepalive_time: 7200 -> 120", r["diff"]["prepared"])
        self.assertFalse(os.path.exists(os.path.dirname(self.plan_file)))
        self.assertEqual(self.modes(), ["--plan", "--plan"])
        self.assertEqual(helpers.sets(self.state), [])

    def test_refused_plan_fails_with_dbhost_reasons(self):
        helpers.configure(self.state, refuse=True)
        failed, r = self.fix(state="planned")
        self.assertTrue(failed)
        self.assertIn("REFUSED", r["msg"])
        self.assertIn("mem.hugepages.postgres (postgres:5432)", r["msg"])

    def test_applied_applies_the_saved_plan(self):
        failed, r = self.fix(state="planned", plan_file=self.plan_file)
        self.assertFalse(failed, r)
        failed, r = self.fix(state="applied", plan_file=self.plan_file, allow_restart=True, budget="postgres:5432=40%")
        self.assertFalse(failed, r)
        self.assertTrue(r["changed"])
        cid = helpers.sets(self.state)[0]["id"]
        self.assertEqual(r["change_id"], cid)
        self.assertEqual(r["change_status"], "applied")
        self.assertEqual(r["after"], [{"status": "pass", "target": "net.fin_timeout", "reason": ""},
                                      {"status": "pass", "target": "net.keepalive", "reason": ""}])
        # The plan's text, from the apply's stderr, without dbhost's messages.
        self.assertEqual(r["plan"], helpers.fixture("plan-net.txt"))
        # The saved plan decides: no second --plan, the apply gets --plan-file,
        # and its JSON names the set (no --history around it).
        self.assertEqual(helpers.calls(self.state)[-1:], [
            ["fix", "--apply", "--format=json", "--plan-file=" + self.plan_file, "--budget=postgres:5432=40%",
             "--allow-restart"]])
        self.assertEqual(self.modes(), ["--plan", "--apply"])
        # Applied again: nothing left to change.
        failed, r = self.fix(state="applied")
        self.assertFalse(failed, r)
        self.assertFalse(r["changed"])
        self.assertEqual(len(helpers.sets(self.state)), 1)

    def test_applied_without_plan_file_applies_what_it_showed(self):
        failed, r = self.fix(state="applied", diff=True)
        self.assertFalse(failed, r)
        self.assertTrue(r["changed"])
        plan_call = helpers.calls(self.state)[0]
        apply_call = helpers.calls(self.state)[-1]
        self.assertEqual(plan_call[:2], ["fix", "--plan"])
        saved = plan_call[2][len("--plan-out="):]
        self.assertEqual(apply_call[:4], ["fix", "--apply", "--format=json", "--plan-file=" + saved])
        self.assertIn("+net.ipv4.tcp_keepalive_time = 120", r["diff"]["prepared"])

    def test_killed_apply_is_found_in_the_history_and_recovered(self):
        helpers.configure(self.state, apply_dies=True)
        failed, r = self.fix(state="applied")
        self.assertTrue(failed)
        self.assertIn("dbhost fix --apply failed (exit -9)", r["msg"])
        cid = helpers.sets(self.state)[0]["id"]
        self.assertEqual((r["change_id"], r["change_status"]), (cid, "applying"))
        self.assertEqual(r["cmd"][2], "--apply")  # the result shows the apply, not the history read
        self.assertEqual(self.modes()[-2:], ["--apply", "--history"])
        failed, r = self.fix(state="rolled_back", change_id=cid)
        self.assertFalse(failed, r)
        self.assertTrue(r["changed"])
        self.assertEqual(r["change_status"], "rolled-back")
        self.assertEqual(self.modes()[-3:], ["--history", "--recover", "--history"])

    def test_refused_apply_names_no_set(self):
        failed, r = self.fix(state="planned", plan_file=self.plan_file)
        self.assertFalse(failed, r)
        helpers.configure(self.state, refuse_apply=True)  # the host moved on since the plan
        failed, r = self.fix(state="applied", plan_file=self.plan_file)
        self.assertTrue(failed)
        self.assertIn("dbhost fix --apply failed (exit 2): refusing to apply: /etc/sysctl.d/60-dbhost.conf "
                      "changed since the plan (sha256 e41ffe89", r["msg"])
        self.assertNotIn("change_id", r)
        self.assertEqual(self.modes(), ["--plan", "--apply", "--history"])

    def test_other_schema_is_refused(self):
        helpers.configure(self.state, schema="dbhost.changes/2")
        failed, r = self.fix(state="applied")
        self.assertTrue(failed)
        self.assertIn("schema 'dbhost.changes/2', not dbhost.changes/1", r["msg"])
        failed, r = self.fix(state="rolled_back")
        self.assertTrue(failed)
        self.assertIn("dbhost fix --history --format=json: schema 'dbhost.changes/2', not dbhost.changes/1", r["msg"])

    def test_failed_apply_names_its_set(self):
        helpers.configure(self.state, apply_fails=True)
        failed, r = self.fix(state="applied")
        self.assertTrue(failed)
        self.assertIn("dbhost fix --apply failed (exit 2): apply: create /tmp/json-rec/root2/etc/sysctl.d/60-dbhost.conf: "
                      "read-only file system (everything changed so far was put back)", r["msg"])
        self.assertEqual(r["change_id"], helpers.sets(self.state)[0]["id"])
        self.assertEqual(self.modes(), ["--plan", "--apply"])
        self.assertEqual(r["change_status"], "failed")
        # Rolling that set back is already done: nothing to change.
        failed, r = self.fix(state="rolled_back", change_id=r["change_id"])
        self.assertFalse(failed, r)
        self.assertFalse(r["changed"])
        self.assertNotIn("--rollback", self.modes())

    def test_still_failing_after_apply_warns(self):
        helpers.configure(self.state, fail_after=True)
        failed, r = self.fix(state="applied")
        self.assertFalse(failed, r)
        self.assertTrue(r["changed"])
        self.assertIn("do not pass yet: net.fin_timeout, net.keepalive", r["warnings"][0])
        self.assertIn("Orphaned connections stay in FIN-WAIT-2", r["after"][0]["reason"])

    def test_rolled_back(self):
        failed, r = self.fix(state="applied")
        cid = r["change_id"]
        failed, r = self.fix(state="rolled_back", check=True)
        self.assertFalse(failed, r)
        self.assertTrue(r["changed"])
        self.assertEqual(r["change_id"], cid)
        self.assertIn("would roll back change set " + cid, r["msg"])
        self.assertEqual(helpers.sets(self.state)[0]["status"], "applied")
        failed, r = self.fix(state="rolled_back", change_id=cid)
        self.assertFalse(failed, r)
        self.assertTrue(r["changed"])
        self.assertEqual(r["change_status"], "rolled-back")
        self.assertEqual(helpers.calls(self.state)[-2], ["fix", "--rollback", cid])
        failed, r = self.fix(state="rolled_back")
        self.assertFalse(failed, r)
        self.assertFalse(r["changed"])
        self.assertEqual(r["msg"], "no applied change set to roll back")

    def test_rolled_back_unknown_or_bad_id(self):
        failed, r = self.fix(state="rolled_back", change_id="20261127T150312Z-3fa2")
        self.assertTrue(failed)
        self.assertIn("no change set 20261127T150312Z-3fa2", r["msg"])
        failed, r = self.fix(state="rolled_back", change_id="--recover")
        self.assertTrue(failed)
        self.assertIn("is no change set ID", r["msg"])

    def test_arguments_are_never_flags(self):
        for args in ({"only": ["--apply"]}, {"skip": ["a,b"]}, {"budget": "--apply"},
                     {"plan_file": "relative.json"}, {"change_id": "20261127T150312Z-3fa2"}):
            failed, r = self.fix(state="planned", **args)
            self.assertTrue(failed, args)
        self.assertEqual(helpers.calls(self.state), [])

    @unittest.skipUnless(os.geteuid() == 0, "root judges the plan's directory")
    def test_plan_dir_others_can_write(self):
        d = os.path.dirname(self.plan_file)
        os.mkdir(d, 0o700)
        os.chmod(d, 0o777)
        for state in ("planned", "applied"):
            failed, r = self.fix(state=state, plan_file=self.plan_file)
            self.assertTrue(failed, state)
            self.assertIn("writable by nobody else", r["msg"])
        self.assertEqual(helpers.calls(self.state), [])

    def test_untrusted_binary(self):
        os.chmod(self.binary, 0o777)
        failed, r = self.fix(state="planned")
        self.assertTrue(failed)
        if os.geteuid() == 0:
            self.assertIn("nobody else may write it", r["msg"])
        self.assertEqual(helpers.calls(self.state), [])
        failed, r = self.fix(state="planned", binary="dbhost")
        self.assertTrue(failed)
        self.assertIn("absolute path", r["msg"])


class Health(ModuleCase):
    def test_healthy_and_expect(self):
        failed, r = self.health(timeout=0)
        self.assertFalse(failed, r)
        self.assertTrue(r["healthy"])
        self.assertFalse(r["changed"])
        self.assertEqual(r["expect"], {"instances": ["postgres:5432"], "galera": {}})
        self.assertEqual(r["attempts"], 1)
        self.assertEqual(helpers.calls(self.state), [["audit", "--format=json", "--fail-on=none"]])

    def test_checks_failing_until_timeout(self):
        # The bound leaves room for several tries of the fake even on a loaded CI host.
        failed, r = self.health(only=["net.keepalive"], timeout=4, delay=0)
        self.assertTrue(failed)
        self.assertFalse(r["healthy"])
        self.assertGreater(r["attempts"], 1)
        self.assertEqual(r["failures"], ["net.keepalive (host): fail: net.keepalive not as wanted"])
        self.assertIn("not healthy after", r["msg"])
        self.assertEqual(helpers.calls(self.state)[0], ["audit", "--format=json", "--fail-on=none", "--only=net.keepalive"])

    def test_gate_stops_a_hanging_audit(self):
        # A hanging audit fails the gate at its bound instead of holding the roll-out.
        helpers.configure(self.state, hang=30)
        began = time.time()
        failed, r = self.health(timeout=0, delay=0, audit_timeout=1)
        self.assertTrue(failed)
        self.assertLess(time.time() - began, 15)
        self.assertIn("did not finish in 1 s", r["msg"])

    def test_gate_after_apply(self):
        _, before = self.health(timeout=0)
        self.fix(state="applied")
        failed, r = self.health(only=["net.keepalive", "net.fin_timeout"], expect=before["expect"], timeout=0, check=True)
        self.assertFalse(failed, r)

    def test_database_down_after_apply(self):
        helpers.configure(self.state, down_after=True)
        _, before = self.health(timeout=0)
        self.fix(state="applied")
        failed, r = self.health(only=["net.keepalive"], expect=before["expect"], timeout=0)
        self.assertTrue(failed)
        self.assertEqual(r["failures"], ["postgres:5432: does not answer (dial unix "
                                         "/var/run/postgresql/.s.PGSQL.5432: connect: no such file or directory)"])

    def test_galera_shrunk(self):
        helpers.configure(self.state, galera={"cluster_size": 3})
        _, before = self.health(timeout=0)
        self.assertEqual(before["galera"], {"mysql:3306": 3})
        helpers.configure(self.state, galera={"cluster_size": 2, "local_state": "Donor/Desynced"})
        failed, r = self.health(expect=before["expect"], timeout=0)
        self.assertTrue(failed)
        self.assertEqual(r["failures"], ["mysql:3306: Galera node is Donor/Desynced, not Synced",
                                         "mysql:3306: Galera cluster has 2 nodes, had 3 before the change"])

    def test_waivers_and_budget_pass_through(self):
        self.health(timeout=0, no_waivers=True, budget="postgres:5432=40%")
        self.health(timeout=0, waivers="/etc/dbhost/waivers.yaml")
        self.assertEqual(helpers.calls(self.state), [
            ["audit", "--format=json", "--fail-on=none", "--budget=postgres:5432=40%", "--no-waivers"],
            ["audit", "--format=json", "--fail-on=none", "--waivers=/etc/dbhost/waivers.yaml"]])


if __name__ == "__main__":
    unittest.main()
