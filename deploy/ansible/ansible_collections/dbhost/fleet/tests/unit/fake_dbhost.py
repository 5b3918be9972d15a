#!/usr/bin/python3
# -*- coding: utf-8 -*-
# Copyright: the dbhost authors. Apache License 2.0 (see LICENSE).

"""A stand-in for the dbhost binary in the modules' unit tests.

It prints what dbhost prints, taken from real dbhost's recorded output in
fixtures/ (plan-net.json and plan-net.txt: `fix --plan` of a live host;
changes-*.json: `fix --apply|--history --format json`, schema
dbhost.changes/1), and keeps its change sets, as dbhost writes them, in a
state directory, so that the modules and rollout.yml run end to end on the
controller without changing anything. Run as `fake_dbhost.py STATE ARGS...`
through a wrapper script the tests write; STATE/config.json says how it
behaves:

  pending      the plan has changes until a set is applied (default true)
  refuse       --plan refuses (exit 2)
  refuse_apply --apply refuses the plan (the host changed since; exit 2)
  apply_fails  --apply fails and rolls itself back (status failed, exit 2)
  apply_dies   --apply is killed (SIGKILL) after it opened its set, leaving
               it applying, before it printed anything
  schema       the schema its JSON names (default dbhost.changes/1)
  down         the database does not answer
  down_after   after an apply, the database does not answer
  fail_after   after an apply, the fixed checks still fail
  hang         audit sleeps this many seconds before it answers
  galera       the instance is a Galera node: {"cluster_size": N, "local_state": ...}

Only the --format json of --history and --apply is simulated (the modules
read nothing else). Every call is appended to STATE/calls.log (one JSON
list per line).
"""

from __future__ import absolute_import, division, print_function

import copy
import json
import os
import random
import signal
import sys
import time

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
CHECKS = ["net.fin_timeout", "net.keepalive"]


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


def load(state, name, default):
    try:
        with open(os.path.join(state, name)) as f:
            return json.load(f)
    except (IOError, OSError, ValueError):
        return default


def save(state, name, value):
    with open(os.path.join(state, name), "w") as f:
        json.dump(value, f)


def flag(args, name):
    for a in args:
        if a == name:
            return ""
        if a.startswith(name + "="):
            return a[len(name) + 1:]
    return None


def applied(sets):
    return [s for s in sets if s["status"] == "applied"]


def now_rfc3339():
    """Go's RFC 3339 with nanoseconds in UTC, as dbhost writes times."""
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%09dZ" % int((t % 1) * 1e9)


def changes(cfg, sets):
    return json.dumps({"schema": cfg.get("schema", "dbhost.changes/1"), "change_sets": sets}, indent=2)


def new_set(cfg, plan):
    """A change set of the plan, shaped as the recorded one (its keys,
    its after's reasons)."""
    recorded = json.loads(fixture("changes-apply.json"))["change_sets"][0]
    cs = copy.deepcopy(recorded)
    t = time.gmtime()
    cs["id"] = time.strftime("%Y%m%dT%H%M%SZ", t) + "-%04x" % random.randrange(0x10000)
    cs["root"] = "/"
    cs["created"] = cs["finished"] = now_rfc3339()
    cs["findings"], cs["files"], cs["values"] = plan["findings"], plan["files"], plan["values"]
    st = "fail" if cfg.get("fail_after") else "pass"
    for o in cs["after"]:
        o["status"] = st
        if st == "pass":
            o.pop("reason", None)
    return cs


def fix(state, cfg, args):
    sets = load(state, "sets.json", [])
    pending = cfg.get("pending", True) and not applied(sets)
    json_out = flag(args, "--format") == "json"
    if ("--history" in args or "--apply" in args) and not json_out:
        sys.stderr.write("fake dbhost: only --format json of --history and --apply is simulated\n")
        return 2
    if "--history" in args:
        print(changes(cfg, sets))
        return 0
    plan = json.loads(fixture("plan-net.json"))
    text = fixture("plan-net.txt")
    if "--plan" in args:
        if cfg.get("refuse"):
            print("REFUSED: the planned host, judged after 2 rounds, fails 1 checks; nothing will be changed:")
            print("  - mem.hugepages.postgres (postgres:5432): still fails under the plan")
            return 2
        out = flag(args, "--plan-out")
        if not pending:
            for item in plan["files"] + plan["values"]:
                item["unchanged"] = True
            text = "Fixes for 2 findings.\n\nvalue /proc/sys/net/ipv4/tcp_keepalive_time: already 120\n"
        if out:
            with open(out, "w") as f:
                json.dump(plan, f, indent=2)
            os.chmod(out, 0o600)
            sys.stderr.write("dbhost fix: plan saved to %s\n" % out)
        sys.stdout.write(text)
        return 1 if pending else 0
    if "--apply" in args:
        pf = flag(args, "--plan-file")
        if pf is not None and not os.path.exists(pf):
            sys.stderr.write("dbhost fix: open %s: no such file or directory\n" % pf)
            return 2
        if not pending:
            sys.stderr.write("dbhost fix: apply: nothing to change: every file and value is already as the fixes want\n")
            return 2
        if cfg.get("refuse_apply"):
            sys.stderr.write(fixture("changes-apply-refused.stderr"))
            return 2
        sys.stderr.write(text)  # --format json: the plan's text on stderr
        cs = new_set(cfg, plan)
        if cfg.get("apply_dies"):
            cs["status"] = "applying"
            del cs["finished"], cs["after"]
            sets.append(cs)
            save(state, "sets.json", sets)
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        if cfg.get("apply_fails"):
            failed = json.loads(fixture("changes-apply-failed.json"))["change_sets"][0]
            del cs["after"]
            cs.update(status="failed", errors=failed["errors"], rolled_back=cs["finished"], rolled_back_by="apply")
            sets.append(cs)
            save(state, "sets.json", sets)
            print(changes(cfg, [cs]))
            sys.stderr.write("dbhost fix: apply: %s (everything changed so far was put back)\n" % cs["errors"][0])
            return 2
        cs["status"] = "applied"
        sets.append(cs)
        save(state, "sets.json", sets)
        print(changes(cfg, [cs]))
        return 1 if cfg.get("fail_after") else 0
    if "--rollback" in args:
        i = args.index("--rollback")
        cid = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("-") else None
        target = None
        for s in reversed(sets):
            if (cid and s["id"] == cid) or (not cid and s["status"] == "applied"):
                target = s
                break
        if target is None or target["status"] != "applied":
            sys.stderr.write("dbhost fix: rollback: no applied change set %s\n" % cid)
            return 2
        target.update(status="rolled-back", rolled_back=now_rfc3339(), rolled_back_by="root")
        save(state, "sets.json", sets)
        print("rolled back %s: %d files, %d kernel values and 0 database settings as they were before" % (
            target["id"], len(target["files"]), len(target["values"])))
        return 0
    if "--recover" in args:
        done = False
        for s in sets:
            if s["status"] in ("applying", "rolling-back"):
                s.update(status="rolled-back", rolled_back=now_rfc3339(), rolled_back_by="recover")
                sys.stderr.write("dbhost fix: change set %s was left unfinished by an interrupted run: rolled back\n" % s["id"])
                done = True
        save(state, "sets.json", sets)
        if not done:
            print("nothing to recover")
        return 0
    sys.stderr.write("fake dbhost: unknown fix mode %r\n" % args)
    return 2


def audit(state, cfg, args):
    if cfg.get("hang"):
        time.sleep(cfg["hang"])
    sets = load(state, "sets.json", [])
    done = bool(applied(sets))
    only = (flag(args, "--only") or "").split(",") if flag(args, "--only") else []
    inst = {"name": "postgres:5432", "engine": "postgres", "flavor": "PostgreSQL", "settings_source": "live"}
    if cfg.get("down") or (done and cfg.get("down_after")):
        inst["settings_source"] = "files"
        inst["live_error"] = "dial unix /var/run/postgresql/.s.PGSQL.5432: connect: no such file or directory"
    if cfg.get("galera"):
        inst = {"name": "mysql:3306", "engine": "mysql", "flavor": "MariaDB", "settings_source": "live",
                "galera": dict({"cluster_status": "Primary", "local_state": "Synced", "cluster_size": 3,
                                "ready": True, "connected": True}, **cfg["galera"])}
    findings = []
    for c in CHECKS:
        if only and not any(c == o or c.startswith(o + ".") for o in only):
            continue
        ok = done and not cfg.get("fail_after")
        findings.append({"id": c, "subject": "host", "severity": "warning", "status": "pass" if ok else "fail",
                         "reason": "%s %s" % (c, "as wanted" if ok else "not as wanted")})
    doc = {"schema": "dbhost.audit/1", "host": {"hostname": os.path.basename(state), "source": "live"},
           "instances": [inst], "summary": {}, "findings": findings, "notes": []}
    print(json.dumps(doc))
    return 0


def main():
    state, args = sys.argv[1], sys.argv[2:]
    cfg = load(state, "config.json", {})
    with open(os.path.join(state, "calls.log"), "a") as f:
        f.write(json.dumps([time.time()] + args) + "\n")
    if args and args[0] == "fix":
        return fix(state, cfg, args[1:])
    if args and args[0] == "audit":
        return audit(state, cfg, args[1:])
    sys.stderr.write("fake dbhost: unknown command %r\n" % args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
