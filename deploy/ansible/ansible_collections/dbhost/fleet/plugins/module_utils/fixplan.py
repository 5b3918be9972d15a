# -*- coding: utf-8 -*-
# Copyright: the dbhost authors. Apache License 2.0 (see LICENSE).

"""What `dbhost fix` says, read for the dbhost_fix module.

dbhost writes the plan as JSON (--plan-out), and the change sets as JSON
(--history and --apply with --format json, schema dbhost.changes/1 in
docs/json-schema.md); with --apply --format json the plan's text goes to
stderr, after and between dbhost's own "dbhost fix: ..." messages.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import json
import re

SCHEMA = "dbhost.changes/1"

# Change set IDs: YYYYMMDDTHHMMSSZ-xxxx (internal/apply), the creation
# time in UTC: sorted as strings, they sort by time.
CHANGE_ID = r"[0-9]{8}T[0-9]{6}Z-[0-9a-f]{4}"
CHANGE_ID_RE = re.compile(r"^" + CHANGE_ID + r"$")

_TIME_RE = re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.\d+)?(Z|[+-]\d\d:\d\d)$")
# dbhost's own messages on stderr ("dbhost fix: waiting for the host
# lock ...", "dbhost fix: apply: ..."); no line of a plan starts so.
_MESSAGE_RE = re.compile(r"^dbhost( [a-z-]+)?: ")

# Change set statuses (internal/apply): applied can be rolled back; the
# unfinished ones are put back by `fix --recover`; the rest are done.
APPLIED = "applied"
UNFINISHED = ("applying", "rolling-back")
PUT_BACK = ("rolled-back", "failed")


def load_changes(stdout):
    """The raw change sets of a dbhost.changes/1 document, oldest first;
    ValueError, saying why, when stdout is none."""
    try:
        doc = json.loads(stdout)
    except ValueError as e:
        raise ValueError("not JSON (%s)" % e)
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    if doc.get("schema") != SCHEMA:
        raise ValueError("schema %r, not %s: this dbhost is newer or older than the module" % (doc.get("schema"), SCHEMA))
    sets = doc.get("change_sets")
    if not isinstance(sets, list) or not all(isinstance(cs, dict) and cs.get("id") for cs in sets):
        raise ValueError("change_sets is no list of change sets")
    return sets


def utc_text(stamp):
    """An RFC 3339 time as "YYYY-MM-DD HH:MM:SSZ" in UTC (what the history
    text shows); "" for none, the text itself when it is no such time."""
    m = _TIME_RE.match(stamp or "")
    if not m:
        return stamp or ""
    t = datetime.datetime(*[int(g) for g in m.groups()[:6]])
    off = m.group(7)
    if off != "Z":
        sign = 1 if off[0] == "+" else -1
        t -= sign * datetime.timedelta(hours=int(off[1:3]), minutes=int(off[4:6]))
    return t.strftime("%Y-%m-%d %H:%M:%SZ")


def target(t):
    """A finding as dbhost names it: "ID" on the host, "ID (subject)" on an instance."""
    subject = t.get("subject") or "host"
    return t.get("id", "") if subject == "host" else "%s (%s)" % (t.get("id", ""), subject)


def summarize(cs):
    """A change set as the module returns it: id, status, created, by,
    files, values, settings (counts), fixed (targets), errors and, once
    rolled back, rolled_back_at and rolled_back_by."""
    by = cs.get("user") or str(cs.get("uid", ""))
    if cs.get("sudo_user"):
        by += " (sudo by %s)" % cs["sudo_user"]
    out = {
        "id": cs["id"],
        "status": cs.get("status", ""),
        "created": utc_text(cs.get("created")),
        "by": by,
        "files": len(cs.get("files") or []),
        "values": len(cs.get("values") or []),
        "settings": len(cs.get("settings") or []),
        "fixed": [target(t) for t in cs.get("findings") or []],
        "errors": list(cs.get("errors") or []),
    }
    if cs.get("rolled_back"):
        out["rolled_back_at"] = utc_text(cs["rolled_back"])
        out["rolled_back_by"] = cs.get("rolled_back_by", "")
    return out


def parse_history(stdout):
    """The change sets `fix --history --format json` lists, oldest first,
    each summarized; ValueError when stdout is no dbhost.changes/1."""
    return [summarize(cs) for cs in load_changes(stdout)]


def parse_applied(stdout):
    """The change set `fix --apply --format json` wrote, raw, or None when
    it printed none (refused before writing one, or died); ValueError when
    it printed something else."""
    if not (stdout or "").strip():
        return None
    sets = load_changes(stdout)
    if len(sets) != 1:
        raise ValueError("%d change sets where the apply writes one" % len(sets))
    return sets[0]


def after_statuses(cs):
    """The fixed findings audited again after the apply: [{"status", "target", "reason"}]."""
    return [{"status": o.get("status", ""), "target": target(o), "reason": o.get("reason", "")}
            for o in cs.get("after") or []]


def plan_text(stderr):
    """The plan's text from --apply --format json's stderr, without
    dbhost's own messages."""
    lines = (stderr or "").splitlines(True)
    return "".join(ln for ln in lines if not _MESSAGE_RE.match(ln))


def since(sets, change_id_floor):
    """The sets made at or after the second change_id_floor
    ("YYYYMMDDTHHMMSSZ") names, oldest first."""
    return [cs for cs in sets if cs["id"][:16] >= change_id_floor]


def find_set(sets, change_id=None):
    """The set change_id names, or, without one, the latest applied set."""
    for cs in reversed(sets):
        if change_id:
            if cs["id"] == change_id:
                return cs
        elif cs["status"] == APPLIED:
            return cs
    return None


def load_plan(text):
    """A plan saved by --plan-out, as a dict; ValueError when it is none."""
    plan = json.loads(text)
    if not isinstance(plan, dict) or "findings" not in plan:
        raise ValueError("not a dbhost plan (no findings)")
    return plan


def plan_changes(plan):
    """True when the plan changes anything (dbhost's Plan.Changes)."""
    for kind in ("files", "values", "settings"):
        for item in plan.get(kind) or []:
            if not item.get("unchanged"):
                return True
    return False


def plan_checks(plan):
    """The IDs of the checks the plan fixes, sorted, each once."""
    ids = set()
    for t in plan.get("findings") or []:
        if t.get("id"):
            ids.add(t["id"])
    return sorted(ids)


def plan_targets(plan):
    """The findings the plan fixes: "ID" on the host, "ID (subject)" on an instance."""
    return [target(t) for t in plan.get("findings") or []]


def plan_summary(plan):
    """Counts of what the plan changes, for the module's result."""
    def changed(kind):
        return [i for i in plan.get(kind) or [] if not i.get("unchanged")]
    return {
        "files": [f.get("path", "") for f in changed("files")],
        "values": ["%s: %s -> %s" % (v.get("path", ""), v.get("old", ""), v.get("new", "")) for v in changed("values")],
        "settings": ["%s %s: %s -> %s" % ((s.get("server") or {}).get("name", ""), s.get("key", ""),
                                          s.get("old", ""), s.get("new", "")) for s in changed("settings")],
        "not_applied": list(plan.get("not_applied") or []),
    }
