package check

import (
	"fmt"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/mongo"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
)

// MongoDB-only judgments: access control and the storage engine. How the
// host serves mongod (THP by version, max_map_count, NUMA, XFS for
// WiredTiger, read-ahead) lives in the host domains.

func init() {
	Register(Check{
		ID:        "mongodb.auth",
		Title:     "mongod on a network address enforces access control",
		Problem:   "mongod on a network address does not enforce access control",
		Severity:  Critical,
		AppliesTo: []string{"mongodb"},
		Doc: `Looks at the sockets mongod really listens on (/proc/net/tcp, tcp6 and the
process's socket inodes, not net.bindIp) and at its effective access control:
security.authorization, or internal authentication (security.keyFile, x509
clusterAuthMode), which turns authorization on, unless security.transitionToAuth
lets unauthenticated clients in. Settings come from mongod.conf (YAML), the command
line (--auth, --bind_ip_all, --keyFile ...) and the defaults of the version. Since
3.6 mongod binds localhost only by default; a server opened to the network with
bindIp or bindIpAll but without access control lets anyone who reaches the port
read, change and drop every database. Loopback and Unix sockets only: pass.`,
		Refs: []string{
			"https://www.mongodb.com/docs/manual/administration/security-checklist/",
			"https://www.mongodb.com/docs/manual/tutorial/configure-scram-client-authentication/",
			"https://www.mongodb.com/docs/manual/core/security-mongodb-configuration/",
		},
		Run: checkMongoAuth,
	})
	Register(Check{
		ID:        "mongodb.storage_engine",
		Title:     "mongod uses the WiredTiger storage engine",
		Problem:   "mongod does not use the WiredTiger storage engine",
		Severity:  Warning,
		AppliesTo: []string{"mongodb"},
		Doc: `Reads the storage engine the data is in: the data directory's storage.bson
(written by mongod on first start; mongod follows it when no engine is configured
and refuses to start when the configured one differs), else storage.engine from the
configuration or --storageEngine, else the version's default (WiredTiger since 3.2).
WiredTiger is the only general-purpose engine of current MongoDB: document-level
concurrency, compression, checkpoints plus a journal. MMAPv1 (deprecated in 4.0,
removed in 4.2) locks whole collections and cannot be upgraded in place past 4.0;
inMemory (Enterprise) keeps nothing across a restart, which is only right for a
deliberate cache; test engines (ephemeralForTest, devnull) are not for data.`,
		Refs: []string{
			"https://www.mongodb.com/docs/manual/core/storage-engines/",
			"https://www.mongodb.com/docs/manual/release-notes/4.2-compatibility/#removal-of-mmapv1-storage-engine",
			"https://www.mongodb.com/docs/manual/tutorial/change-standalone-wiredtiger/",
		},
		Run: checkMongoStorageEngine,
	})
}

func checkMongoAuth(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.ByEngine(engine.MongoDB) {
		if in.Mongo == nil {
			continue
		}
		subj := in.Name()
		exposed, all := exposedListeners(in)
		on, by := mongo.AuthEnforced(in.Instance)
		ev := []Evidence{
			listenEv(in, all),
			instSettingEv(in, "net.bindIp"), instSettingEv(in, "net.bindIpAll"), instSettingEv(in, by),
			Ev("version", in.Flavor+" "+textOrUnknown(in.Version), in.VersionSource),
		}
		cfgKnown := in.Mongo.ConfigErr == ""
		switch {
		case len(in.Listen) == 0 && in.ListenErr != "":
			if cfgKnown && on {
				out = append(out, PassR(subj, "Access control is enforced ("+by+"), wherever mongod listens.", ev...))
				continue
			}
			out = append(out, UnknownR(subj, "Cannot see which addresses mongod listens on: "+in.ListenErr+".", ev...))
			continue
		case len(exposed) == 0:
			out = append(out, PassR(subj, fmt.Sprintf("Listens only on loopback or Unix sockets (%s): only clients on this host can reach it.", strings.Join(all, ", ")), ev...))
			continue
		case !cfgKnown:
			out = append(out, UnknownR(subj, fmt.Sprintf("Listens on %s, but its access control is unknown: %s.", listenersText(exposed), in.Mongo.ConfigErr), ev...))
			continue
		case on:
			out = append(out, PassR(subj, fmt.Sprintf("Listens on %s and enforces access control (%s).", listenersText(exposed), by), ev...))
			continue
		}
		conf := "mongod.conf"
		if len(in.ConfigFiles) > 0 {
			conf = in.ConfigFiles[0]
		}
		reason := fmt.Sprintf("Listens on %s without access control: anyone who reaches the port can read, change and drop every database, and create users.", listenersText(exposed))
		if by == "security.transitionToAuth" {
			reason = fmt.Sprintf("Listens on %s with security.transitionToAuth: true, which accepts unauthenticated clients (a step meant for a rolling change only): anyone who reaches the port can read, change and drop every database.", listenersText(exposed))
		}
		out = append(out, FailR(subj, reason, &fix.Fix{
			Summary: "Enforce access control in mongod",
			Manual:  fmt.Sprintf(`First create an administrator from this host (the localhost exception allows it while no user exists): mongosh --port %d admin --eval 'db.createUser({user: "admin", pwd: passwordPrompt(), roles: ["root"]})'. Then, in %s, set authorization: enabled in the security: section (and remove transitionToAuth), give the applications their own users, and restart mongod. If no remote client needs it, also bind loopback only (net.bindIp: 127.0.0.1, no bindIpAll).`, in.Port, conf),
		}, ev...))
	}
	return out
}

func checkMongoStorageEngine(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.ByEngine(engine.MongoDB) {
		if in.Mongo == nil {
			continue
		}
		subj := in.Name()
		eng, src := in.Mongo.StorageEngine, in.Mongo.StorageEngineSource
		ev := []Evidence{Ev("storage engine", textOrUnknown(eng), src), Ev("version", in.Flavor+" "+textOrUnknown(in.Version), in.VersionSource)}
		if eng == "" || (in.Mongo.ConfigErr != "" && !strings.HasPrefix(src, "file:") && src != "cmdline") {
			why := in.Mongo.ConfigErr
			if strings.HasPrefix(src, "default (") {
				why += "; " + strings.TrimSuffix(strings.TrimPrefix(src, "default ("), ")")
			}
			out = append(out, UnknownR(subj, "Cannot tell which storage engine mongod uses: "+strings.TrimPrefix(why, "; ")+".", ev...))
			continue
		}
		switch strings.ToLower(eng) {
		case "wiredtiger":
			out = append(out, PassR(subj, "WiredTiger: document-level concurrency, compression, checkpoints and a journal.", ev...))
		case "mmapv1":
			out = append(out, FailR(subj, fmt.Sprintf("MMAPv1 (MongoDB %s) locks whole collections for writes, does not compress, and was removed in 4.2: the server cannot be upgraded past 4.0 until the data is in WiredTiger.", textOrUnknown(in.Version)),
				&fix.Fix{Summary: "Move the data to WiredTiger", Manual: "Migrate to WiredTiger: in a replica set, restart members one at a time with storage.engine: wiredTiger and an empty dbPath so they resync from the others; a standalone needs mongodump, a restart on an empty dbPath with storage.engine: wiredTiger, then mongorestore."}, ev...))
		case "inmemory":
			out = append(out, FailR(subj, "The inMemory engine keeps no data across a restart or crash: everything is lost each time mongod stops. That is only right for a deliberate cache; otherwise use WiredTiger.",
				&fix.Fix{Summary: "Store the data with WiredTiger", Manual: "If this server must keep its data, set storage.engine: wiredTiger on an empty dbPath and reload the data (a replica set member resyncs on its own)."}, ev...))
		default:
			out = append(out, FailR(subj, fmt.Sprintf("Storage engine %s is not a production engine of MongoDB: use WiredTiger.", eng),
				&fix.Fix{Summary: "Store the data with WiredTiger", Manual: "Set storage.engine: wiredTiger on an empty dbPath and reload the data with mongodump/mongorestore (a replica set member resyncs on its own)."}, ev...))
		}
	}
	return out
}
