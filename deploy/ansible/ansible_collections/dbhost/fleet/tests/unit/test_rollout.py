# -*- coding: utf-8 -*-
# Copyright: the dbhost authors. Apache License 2.0 (see LICENSE).

"""rollout.yml's control flow, run by ansible-playbook on three inventory
hosts that are this controller (connection local), each with its own
stand-in dbhost (fake_dbhost.py) and state: serial order, the gate, the
rescue's rollback, the stop, check mode. Nothing outside the test's
directory changes. The roll-out on real hosts is deploy/ansible's
integration test."""

from __future__ import absolute_import, division, print_function

import os
import shutil
import subprocess
import tempfile
import unittest

import helpers

PLAYBOOK = os.path.join(helpers.PLAYBOOKS, "rollout.yml")
HOSTS = ["h1", "h2", "h3"]


@unittest.skipUnless(shutil.which("ansible-playbook"), "ansible-playbook is not installed")
class Rollout(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dbhost-rollout-")
        self.addCleanup(shutil.rmtree, self.dir)
        self.state = {}
        lines = ["[dbhost]"]
        for h in HOSTS:
            st = os.path.join(self.dir, h)
            self.state[h] = st
            lines.append("%s dbhost_binary=%s dbhost_plan_dir=%s" % (h, helpers.fake_binary(st), os.path.join(st, "plans")))
        lines += ["[dbhost:vars]", "ansible_connection=local", "ansible_python_interpreter=" + os.sys.executable,
                  "dbhost_gate_timeout=1", "dbhost_gate_delay=0", 'dbhost_only=["net.keepalive","net.fin_timeout"]']
        self.inventory = os.path.join(self.dir, "inventory.ini")
        with open(self.inventory, "w") as f:
            f.write("\n".join(lines) + "\n")
        home = os.path.join(self.dir, "home")
        os.mkdir(home, 0o700)
        self.env = dict(os.environ, HOME=home, ANSIBLE_COLLECTIONS_PATH=helpers.COLLECTIONS_ROOT,
                        ANSIBLE_LOCAL_TEMP=os.path.join(home, "local"), ANSIBLE_REMOTE_TMP=os.path.join(home, "remote"),
                        ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_RETRY_FILES_ENABLED="0",
                        ANSIBLE_PYTHON_INTERPRETER=os.sys.executable, LC_ALL="C.UTF-8")

    def play(self, *extra):
        # dbhost_become: a local connection runs as the test's user, root.
        p = subprocess.run(["ansible-playbook", "-i", self.inventory, PLAYBOOK, "-e", "dbhost_become=false"] + list(extra),
                           env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        return p.returncode, p.stdout

    def applies(self, h):
        """When host h applied, by the stand-in's log ([] when it did not)."""
        with open(os.path.join(self.state[h], "calls.log")) as f:
            lines = [line for line in f if '"--apply"' in line]
        return [float(line.split(",")[0].lstrip("[")) for line in lines]

    def touched(self, h):
        return os.path.exists(os.path.join(self.state[h], "calls.log"))

    def test_rolls_out_host_by_host(self):
        rc, out = self.play()
        self.assertEqual(rc, 0, out)
        for h in HOSTS:
            self.assertEqual([s["status"] for s in helpers.sets(self.state[h])], ["applied"], h)
        t = [self.applies(h)[0] for h in HOSTS]
        self.assertEqual(t, sorted(t), "hosts applied out of order")
        # One plan name for the whole roll-out, across the batches.
        names = set(n for h in HOSTS for n in os.listdir(os.path.join(self.state[h], "plans")))
        self.assertEqual(len(names), 1, names)
        self.assertIn("gate passed after 1 tries", out)

    def test_failed_gate_rolls_back_and_stops(self):
        helpers.configure(self.state["h2"], down_after=True)
        rc, out = self.play()
        self.assertNotEqual(rc, 0, out)
        self.assertEqual([s["status"] for s in helpers.sets(self.state["h1"])], ["applied"])
        self.assertEqual([s["status"] for s in helpers.sets(self.state["h2"])], ["rolled-back"])
        self.assertFalse(self.touched("h3"), "the host after the failed one was touched")
        self.assertIn("dbhost roll-out stopped at h2: Gate after the change", out)
        self.assertIn("postgres:5432: does not answer", out)
        cid = helpers.sets(self.state["h2"])[0]["id"]
        self.assertIn("Change set %s was rolled back" % cid, out)

    def test_failed_apply_stops(self):
        helpers.configure(self.state["h2"], apply_fails=True)
        rc, out = self.play()
        self.assertNotEqual(rc, 0, out)
        self.assertEqual([s["status"] for s in helpers.sets(self.state["h2"])], ["failed"])
        self.assertFalse(self.touched("h3"))
        self.assertIn("dbhost roll-out stopped at h2: Apply the saved plan as one change set failed", out)

    def test_killed_apply_is_recovered_and_stops(self):
        helpers.configure(self.state["h2"], apply_dies=True)
        rc, out = self.play()
        self.assertNotEqual(rc, 0, out)
        sets = helpers.sets(self.state["h2"])
        self.assertEqual([(s["status"], s["rolled_back_by"]) for s in sets], [("rolled-back", "recover")])
        self.assertFalse(self.touched("h3"))
        self.assertIn("dbhost roll-out stopped at h2: Apply the saved plan as one change set failed", out)
        self.assertIn("Change set %s was rolled back" % sets[0]["id"], out)

    def test_unhealthy_host_is_not_touched(self):
        helpers.configure(self.state["h2"], down=True)
        rc, out = self.play()
        self.assertNotEqual(rc, 0, out)
        self.assertEqual(helpers.sets(self.state["h2"]), [])
        self.assertEqual([c[0] for c in helpers.calls(self.state["h2"])], ["audit"])
        self.assertFalse(self.touched("h3"))
        self.assertIn("dbhost roll-out stopped at h2: the gate before the change failed", out)

    def test_check_mode_changes_nothing(self):
        rc, out = self.play("--check", "--diff")
        self.assertEqual(rc, 0, out)
        self.assertEqual(out.count("+net.ipv4.tcp_keepalive_time = 120"), 3, out)
        for h in HOSTS:
            self.assertEqual(helpers.sets(self.state[h]), [], h)
            self.assertFalse(os.path.exists(os.path.join(self.state[h], "plans")), h)
            self.assertNotIn("--apply", [a for c in helpers.calls(self.state[h]) for a in c])

    def test_plan_only(self):
        rc, out = self.play("--tags", "plan")
        self.assertEqual(rc, 0, out)
        for h in HOSTS:
            self.assertEqual(helpers.sets(self.state[h]), [], h)
            self.assertEqual(len(os.listdir(os.path.join(self.state[h], "plans"))), 1, h)


if __name__ == "__main__":
    unittest.main()
