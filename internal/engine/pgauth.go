package engine

// PostgreSQL client-authentication facts: pg_hba.conf as the server reads it
// and what a live connection tells about roles and the public schema. The
// parsing and its rules live in internal/engine/postgres (hba.go).

// PGHBA is the host-based authentication file with its includes.
type PGHBA struct {
	// File is hba_file; FileSource says where that name came from (a
	// setting's source, or "default" for $PGDATA/pg_hba.conf).
	File       string `json:"file"`
	FileSource string `json:"file_source"`
	// Err says why the file itself could not be read ("" when it was).
	Err string `json:"error,omitempty"`
	// Files are the files read, in order (the main one first).
	Files []string `json:"files,omitempty"`
	// Lines are the records in the order the server matches them.
	Lines []HBALine `json:"lines,omitempty"`
	// Errors are records the server rejects, unreadable includes, include
	// loops and untrusted files, each "file:line: why".
	Errors []string `json:"errors,omitempty"`
	// IdentFile is ident_file; IdentMaps counts its mapping lines.
	IdentFile string   `json:"ident_file,omitempty"`
	IdentMaps int      `json:"ident_maps,omitempty"`
	IdentErr  []string `json:"ident_errors,omitempty"`
}

// HBALine is one pg_hba.conf record.
type HBALine struct {
	File string `json:"file"`
	Line int    `json:"line"`
	// Text is the record as written (continuation lines joined).
	Text string `json:"text"`
	// Type is local, host, hostssl, hostnossl, hostgssenc or hostnogssenc.
	Type      string     `json:"type"`
	Databases []HBAToken `json:"databases"`
	Users     []HBAToken `json:"users"`
	// Address is "" for local, a CIDR (an address with a mask is turned
	// into one), a host name, or the keyword all, samehost or samenet.
	Address string   `json:"address,omitempty"`
	Method  string   `json:"method"`
	Options []string `json:"options,omitempty"`
}

// HBAToken is one name of a database or user list. Quoted names are never
// keywords (a quoted "all" is a role named all).
type HBAToken struct {
	Text   string `json:"t"`
	Quoted bool   `json:"q,omitempty"`
}

// PGSecurity is what a live connection read about logins and privileges.
type PGSecurity struct {
	// Superusers are the roles with rolsuper that may log in, with the
	// roles they are members of (directly or not) for +group matching.
	Superusers []PGRole `json:"superusers"`
	RolesErr   string   `json:"roles_error,omitempty"`
	// PublicCreate: PUBLIC holds CREATE on schema public of Database
	// (PublicACL is the schema's ACL as the server prints it).
	PublicSchema bool   `json:"public_schema"`
	PublicCreate bool   `json:"public_create"`
	PublicACL    string `json:"public_acl,omitempty"`
	Database     string `json:"database,omitempty"`
	PublicErr    string `json:"public_error,omitempty"`
	// MD5Roles name the login roles whose stored password is an MD5 hash,
	// ScramRoles counts those with SCRAM verifiers; HashesErr says why
	// pg_authid could not be read (it needs a superuser).
	MD5Roles   []string `json:"md5_roles,omitempty"`
	ScramRoles int      `json:"scram_roles"`
	HashesErr  string   `json:"hashes_error,omitempty"`
}

// PGRole is a role that can log in.
type PGRole struct {
	Name     string   `json:"name"`
	MemberOf []string `json:"member_of,omitempty"`
}
