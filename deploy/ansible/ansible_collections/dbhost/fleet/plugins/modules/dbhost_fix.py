#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: the dbhost authors. Apache License 2.0 (see LICENSE).

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: dbhost_fix
short_description: Plan, apply and roll back dbhost's fixes on a host
version_added: "1.0.0"
description:
  - Wraps C(dbhost fix --plan), C(--apply) and C(--rollback) (see docs/fix.md in dbhost).
  - C(planned) computes the host's plan (read-only) and, with I(plan_file), saves it as JSON.
    C(changed) is dbhost's verdict (exit 0 nothing to change, 1 changes pending); exit 2 (plan
    refused, or an error) fails the task with dbhost's reasons.
  - C(applied) applies the plan as one journaled change set. With I(plan_file) the saved plan is
    applied (C(--plan-file)), and dbhost refuses if the host or the changes differ from it; without
    it, the plan is made and saved in the task's private directory first, so the plan applied is
    the plan shown. C(changed=false) when the plan is empty.
  - C(rolled_back) puts a change set back exactly (C(fix --rollback)); a set already put back is
    left alone, and a set an interrupted run left unfinished is recovered (C(fix --recover)).
  - In check mode nothing on the host changes, not even I(plan_file); C(planned) and C(applied) run
    C(fix --plan) only, C(rolled_back) reads C(fix --history) and says what would be rolled back.
  - With C(--diff), the result's diff is the plan exactly as dbhost prints it (each file's unified
    diff, each value's old and new).
options:
  state:
    description: What to do with the fixes.
    type: str
    choices: [planned, applied, rolled_back]
    default: applied
  only:
    description: Fix only these checks (IDs or domain prefixes), as C(dbhost fix --only).
    type: list
    elements: str
    default: []
  skip:
    description: Leave these checks out, as C(dbhost fix --skip).
    type: list
    elements: str
    default: []
  plan_file:
    description:
      - The plan on the host, as JSON (mode 0600). C(planned) writes it (C(--plan-out)); C(applied)
        applies it (C(--plan-file)), or makes it first when it does not exist.
      - Its directory is created (mode 0700) when missing; run as root, it must belong to root and
        be writable by nobody else.
    type: path
  change_id:
    description:
      - With C(rolled_back), the change set to put back (C(YYYYMMDDTHHMMSSZ-xxxx)), as returned by
        C(applied). Default the latest applied set.
    type: str
  allow_restart:
    description:
      - With C(applied), restart through its systemd unit a database whose changed settings need a
        restart (C(--allow-restart)). The restart interrupts every connection.
    type: bool
    default: false
extends_documentation_fragment:
  - dbhost.fleet.common
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
notes:
  - C(applied) and C(rolled_back) need root (become). C(planned) reads only.
  - The module reads dbhost's JSON (C(fix --apply --format json), C(fix --history --format json),
    schema C(dbhost.changes/1)), so the dbhost on the host must have C(fix --format); a document of
    another schema fails the task. An apply killed before it printed its change set is found in
    C(fix --history) by the time it started.
seealso:
  - module: dbhost.fleet.dbhost_health
author:
  - the dbhost authors
"""

EXAMPLES = r"""
- name: Show what dbhost would change (ansible-playbook --check --diff shows the diffs)
  dbhost.fleet.dbhost_fix:
    state: planned
    only: [net.keepalive, net.fin_timeout]
    plan_file: /var/lib/dbhost/plans/rollout-20261127T150000Z.json
  register: plan

- name: Apply exactly that plan
  dbhost.fleet.dbhost_fix:
    state: applied
    only: [net.keepalive, net.fin_timeout]
    plan_file: /var/lib/dbhost/plans/rollout-20261127T150000Z.json
  register: applied
  when: plan is changed

- name: Put it back
  dbhost.fleet.dbhost_fix:
    state: rolled_back
    change_id: "{{ applied.change_id }}"
"""

RETURN = r"""
change_id:
  description:
    - C(applied) the change set written; C(rolled_back) the set put back (or that would be).
    - Also on a failed apply when dbhost left a set (its status in I(change_status)).
  returned: when there is one
  type: str
  sample: 20261127T150312Z-3fa2
change_status:
  description: The change set's status in C(fix --history) after the task (applied, rolled-back, failed, ...).
  returned: when there is a change set
  type: str
  sample: applied
checks:
  description: The IDs of the checks the plan fixes (what a health gate should check afterwards).
  returned: planned, applied
  type: list
  elements: str
  sample: [net.fin_timeout, net.keepalive]
fixed:
  description: The findings the plan (or the change set) fixes, C(ID) or C(ID (subject)).
  returned: always
  type: list
  elements: str
  sample: [net.fin_timeout, net.keepalive]
files:
  description: The files the plan writes.
  returned: planned, applied
  type: list
  elements: str
  sample: [/etc/sysctl.d/60-dbhost.conf]
values:
  description: "The kernel and /sys values the plan sets, C(PATH: OLD -> NEW)."
  returned: planned, applied
  type: list
  elements: str
  sample: ["/proc/sys/net/ipv4/tcp_keepalive_time: 7200 -> 120"]
settings:
  description: "The database settings the plan changes, C(SERVER KEY: OLD -> NEW)."
  returned: planned, applied
  type: list
  elements: str
not_applied:
  description: What the plan leaves to a person (dbhost's "Not applied").
  returned: planned, applied
  type: list
  elements: str
plan:
  description: The plan as dbhost prints it (also the diff's C(prepared) with C(--diff)).
  returned: planned, applied
  type: str
plan_file:
  description: The plan saved on the host (not in check mode).
  returned: planned, applied with plan_file
  type: str
after:
  description:
    - C(applied) the fixed findings audited again after the apply, C(status) (pass, fail, unknown),
      C(target) (C(ID) or C(ID (subject))) and dbhost's C(reason).
  returned: applied, when dbhost applied a set
  type: list
  elements: dict
  sample: [{"status": "pass", "target": "net.keepalive", "reason": ""}]
history:
  description:
    - C(rolled_back) the change sets on the host after the task, oldest first, each with C(id),
      C(status), C(created) and, once rolled back, C(rolled_back_at) (C(YYYY-MM-DD HH:MM:SSZ), UTC),
      C(by), C(rolled_back_by), C(fixed), C(errors) and the counts of C(files), C(values), C(settings).
  returned: rolled_back
  type: list
  elements: dict
exit_status:
  description:
    - The exit status of the last dbhost command (C(fix --plan) 1 means changes are pending; not
      named C(rc), which Ansible would take for a failure).
  returned: when dbhost ran
  type: int
cmd:
  description: The last dbhost command, as a list of arguments.
  returned: when dbhost ran
  type: list
  elements: str
stdout:
  description: The output of the last dbhost command.
  returned: when dbhost ran
  type: str
stderr:
  description: The error output of the last dbhost command.
  returned: when dbhost ran
  type: str
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.dbhost.fleet.plugins.module_utils import binary as dbbin
from ansible_collections.dbhost.fleet.plugins.module_utils import fixplan


def too_old(stderr):
    """A hint when the dbhost on the host predates --format json."""
    if "unknown flag: --format" in (stderr or ""):
        return " (this dbhost predates fix --format json: install a newer one)"
    return ""


class Fix:
    def __init__(self, module):
        self.m = module
        self.p = module.params
        self.result = {"changed": False, "fixed": []}

    def run(self, args):
        cmd = [self.p["binary"], "fix"] + args
        rc, out, err = self.m.run_command(cmd, environ_update={"LC_ALL": "C"})
        self.result.update(exit_status=rc, cmd=cmd, stdout=out, stderr=err)
        return rc, out, err

    def fail(self, msg, **kw):
        self.result.update(kw)
        self.m.fail_json(msg=msg, **self.result)

    def exit(self, **kw):
        self.result.update(kw)
        self.m.exit_json(**self.result)

    def history(self):
        rc, out, err = self.run(["--history", "--format=json"])
        if rc != 0:
            self.fail("dbhost fix --history failed (exit %d): %s%s" % (rc, (err or out).strip(), too_old(err)))
        try:
            return fixplan.parse_history(out)
        except ValueError as e:
            self.fail("dbhost fix --history --format=json: %s" % e)

    def temp_plan(self):
        return os.path.join(self.m.tmpdir, "dbhost-plan.json")

    def plan(self, plan_out):
        """Runs fix --plan, saving the plan to plan_out; returns (pending, plan text, plan)."""
        args = ["--plan", "--plan-out=" + plan_out] + dbbin.selection_args(self.p)
        rc, out, err = self.run(args)
        if rc not in (0, 1):
            why = (err or "").strip()
            refused = [ln for ln in out.splitlines() if ln.startswith("REFUSED") or ln.startswith("  - ")]
            if refused:
                why = "\n".join(refused) + ("\n" + why if why else "")
            self.fail("dbhost refused the plan or could not make it (exit %d): %s" % (rc, why or out.strip()[-2000:]))
        try:
            with open(plan_out) as f:
                plan = fixplan.load_plan(f.read())
        except (IOError, OSError, ValueError) as e:
            self.fail("dbhost fix --plan saved no readable plan in %s: %s" % (plan_out, e))
        return rc == 1, out, plan

    def describe(self, plan, text):
        self.result.update(fixplan.plan_summary(plan))
        self.result["checks"] = fixplan.plan_checks(plan)
        self.result["fixed"] = fixplan.plan_targets(plan)
        if text is not None:
            self.result["plan"] = text
            if self.m._diff:
                self.result["diff"] = {"prepared": text}

    def plan_dir(self):
        d = os.path.dirname(self.p["plan_file"])
        if d and not os.path.isdir(d):
            try:
                os.makedirs(d, 0o700)
            except OSError as e:
                self.fail("cannot make the plan's directory %s: %s" % (d, e))
        # Another user who can write there could swap the plan root applies
        # (dbhost would refuse a plan that differs from the host's, but
        # need not be asked).
        st = os.stat(d or ".")
        if os.geteuid() == 0 and (st.st_uid != 0 or st.st_mode & 0o022):
            self.fail("the plan's directory %s must belong to root and be writable by nobody else" % d)

    def planned(self):
        if self.m.check_mode or not self.p["plan_file"]:
            out = self.temp_plan()
        else:
            self.plan_dir()
            out = self.p["plan_file"]
            self.result["plan_file"] = out
        pending, text, plan = self.plan(out)
        self.describe(plan, text)
        self.exit(changed=pending)

    def applied(self):
        pf = self.p["plan_file"]
        if self.m.check_mode:
            pending, text, plan = self.plan(self.temp_plan())
            self.describe(plan, text)
            self.exit(changed=pending)
        if pf:
            self.plan_dir()
        if pf and os.path.exists(pf):
            # The saved plan says whether anything is left to change; dbhost
            # refuses it below when the host moved on since.
            try:
                with open(pf) as f:
                    plan = fixplan.load_plan(f.read())
            except (IOError, OSError, ValueError) as e:
                self.fail("%s: not a plan dbhost saved: %s" % (pf, e))
            pending, text = fixplan.plan_changes(plan), None
        else:
            pending, text, plan = self.plan(pf or self.temp_plan())
        if pf:
            self.result["plan_file"] = pf
        self.describe(plan, text)
        if not pending:
            self.exit(changed=False, msg="nothing to change: every file and value is already as the fixes want")

        args = ["--apply", "--format=json", "--plan-file=" + (pf or self.temp_plan())] + dbbin.selection_args(self.p)
        if self.p["allow_restart"]:
            args.append("--allow-restart")
        # The second the apply starts: a set it wrote has an ID from then on.
        started = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        rc, out, err = self.run(args)
        if text is None:
            self.describe(plan, fixplan.plan_text(err))
        try:
            cs = fixplan.parse_applied(out)
        except ValueError as e:
            self.fail("dbhost fix --apply (exit %d) printed no change set dbhost.changes/1 describes: %s; "
                      "see fix --history on the host" % (rc, e))
        if cs is None:
            # No set printed: refused before writing one, or killed (or
            # crashed) after; then its set is in the history, unfinished,
            # and rolled_back with its ID recovers it.
            hrc, hout, _ = self.run(["--history", "--format=json"])
            try:
                mine = fixplan.since(fixplan.parse_history(hout), started) if hrc == 0 else []
            except ValueError:
                mine = []
            if mine:
                cs = {"id": mine[-1]["id"], "status": mine[-1]["status"]}
            self.result.update(exit_status=rc, cmd=[self.p["binary"], "fix"] + args, stdout=out, stderr=err)
        if cs is not None:
            self.result.update(change_id=cs["id"], change_status=cs.get("status", ""))
        if rc not in (0, 1) or cs is None or cs.get("status") != fixplan.APPLIED:
            msgs = [ln[len("dbhost fix: "):] for ln in err.splitlines() if ln.startswith("dbhost fix: ")
                    and "waiting for the host lock" not in ln]
            why = "\n".join(msgs) or "; ".join((cs or {}).get("errors") or []) or err.strip()[-2000:] or "no reason given"
            if rc in (0, 1):
                self.fail("dbhost fix --apply exited %d but named no applied change set: %s" % (rc, why))
            self.fail("dbhost fix --apply failed (exit %d): %s%s" % (rc, why, too_old(err)))
        after = fixplan.after_statuses(cs)
        self.result["after"] = after
        still = [a["target"] for a in after if a["status"] != "pass"]
        if still:
            self.m.warn("applied change set %s, but these findings do not pass yet: %s" % (cs["id"], ", ".join(still)))
        self.exit(changed=True, msg="applied change set %s" % cs["id"])

    def rolled_back(self):
        cid = self.p["change_id"]
        if cid and not fixplan.CHANGE_ID_RE.match(cid):
            self.fail("change_id %r is no change set ID (YYYYMMDDTHHMMSSZ-xxxx)" % cid)
        sets = self.history()
        cs = fixplan.find_set(sets, cid)
        unfinished = [s for s in sets if s["status"] in fixplan.UNFINISHED]
        if cid and cs is None:
            self.fail("no change set %s on this host" % cid, history=sets)
        if cs is not None:
            self.result.update(change_id=cs["id"], change_status=cs["status"], fixed=cs["fixed"])
        if cs is None and not unfinished:
            self.exit(changed=False, history=sets, msg="no applied change set to roll back")
        if cs is not None and cs["status"] in fixplan.PUT_BACK:
            self.exit(changed=False, history=sets, msg="change set %s is %s: already put back" % (cs["id"], cs["status"]))
        if cs is not None and cs["status"] == fixplan.APPLIED:
            args, what = ["--rollback", cs["id"]], "roll back change set %s (%s)" % (cs["id"], ", ".join(cs["fixed"]))
        else:
            ids = [s["id"] for s in unfinished]
            args, what = ["--recover"], "recover the unfinished change set(s) %s" % ", ".join(ids)
        if self.m.check_mode:
            self.exit(changed=True, history=sets, msg="would " + what)
        rc, out, err = self.run(args)
        sets = self.history()
        self.result.update(exit_status=rc, cmd=[self.p["binary"], "fix"] + args, stdout=out, stderr=err, history=sets)
        if cs is not None:
            now = fixplan.find_set(sets, cs["id"])
            if now:
                self.result["change_status"] = now["status"]
        if rc != 0:
            self.fail("dbhost fix %s failed (exit %d): %s" % (args[0], rc, (err or out).strip()[-2000:]))
        self.exit(changed=True, msg=what[0].upper() + what[1:] + ": done")


def main():
    module = AnsibleModule(
        argument_spec=dbbin.argument_spec(
            state=dict(type="str", default="applied", choices=["planned", "applied", "rolled_back"]),
            only=dict(type="list", elements="str", default=[]),
            skip=dict(type="list", elements="str", default=[]),
            plan_file=dict(type="path"),
            change_id=dict(type="str"),
            allow_restart=dict(type="bool", default=False),
        ),
        mutually_exclusive=[("waivers", "no_waivers")],
        supports_check_mode=True,
    )
    p = module.params
    dbbin.check_common(module)
    if p["plan_file"] is not None and not os.path.isabs(p["plan_file"]):
        module.fail_json(msg="plan_file must be an absolute path on the host")
    if p["change_id"] and p["state"] != "rolled_back":
        module.fail_json(msg="change_id goes with state=rolled_back")
    fix = Fix(module)
    {"planned": fix.planned, "applied": fix.applied, "rolled_back": fix.rolled_back}[p["state"]]()


if __name__ == "__main__":
    main()
